package launch

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/platform/idempotency"
)

// Service reads and changes launch control and checks admission.
type Service struct {
	db     *sqlx.DB
	logger *slog.Logger
	// parsed caches the last control document by version: versions are
	// immutable, so a version seen before never needs parsing again.
	parsed atomic.Pointer[Control]
}

// NewService returns the launch-control service.
func NewService(conn *sqlx.DB, logger *slog.Logger) *Service {
	return &Service{db: conn, logger: logger}
}

// Decide reads the control version in force and the subject's suspensions
// in one round trip, and decides. Any read failure, and a malformed
// control, is a refusal.
func (s *Service) Decide(ctx context.Context, q sqlx.QueryerContext, subject Subject) Decision {
	return s.DecideBy(ctx, q, subject, Admit)
}

// Rule decides admission from the control in force (nil when none).
type Rule func(c *Control, s Subject, susp Suspension) Decision

// DecideBy is Decide with another rule, such as AdmitNewRun or AdmitApply.
func (s *Service) DecideBy(ctx context.Context, q sqlx.QueryerContext, subject Subject, rule Rule) Decision {
	if q == nil {
		q = s.db
	}
	version, susp, err := admissionFacts(ctx, q, subject)
	if err != nil {
		s.logger.WarnContext(ctx, "launch control unreadable: refusing", "error", err)
		return Decision{Reason: "control_unreadable"}
	}
	if version == 0 {
		return rule(nil, subject, susp)
	}
	control := s.parsed.Load()
	if control == nil || control.Version != version {
		control, err = currentControl(ctx, q)
		if err != nil || control == nil {
			s.logger.WarnContext(ctx, "launch control unreadable: refusing", "error", err)
			return Decision{Reason: "control_unreadable"}
		}
		s.parsed.Store(control)
	}
	return rule(control, subject, susp)
}

// Require is Decide that returns fault.ErrAdmissionClosed on refusal.
func (s *Service) Require(ctx context.Context, q sqlx.QueryerContext, subject Subject) (Decision, error) {
	return s.RequireBy(ctx, q, subject, Admit)
}

// RequireBy is DecideBy that returns fault.ErrAdmissionClosed on refusal.
func (s *Service) RequireBy(ctx context.Context, q sqlx.QueryerContext, subject Subject, rule Rule) (Decision, error) {
	d := s.DecideBy(ctx, q, subject, rule)
	if !d.Admitted {
		s.logger.DebugContext(ctx, "admission refused", "organization_id", subject.OrganizationID,
			"workspace_id", subject.WorkspaceID, "reason", d.Reason)
		return d, fault.ErrAdmissionClosed
	}
	return d, nil
}

// Current returns the control in force (nil when none exists).
func (s *Service) Current(ctx context.Context) (*Control, error) {
	return currentControl(ctx, s.db)
}

// Change is one operator change of the control document.
type Change struct {
	Actor           string
	RequestID       string
	IdempotencyKey  string
	ExpectedVersion int // 0 when no control exists yet
	Reason          string
	Document        Control
}

func (ch Change) validate() error {
	if err := idempotency.ValidateKey(ch.IdempotencyKey); err != nil {
		return err
	}
	if r := strings.TrimSpace(ch.Reason); r == "" || len(r) > 500 {
		return fmt.Errorf("%w: reason must be 1-500 characters", fault.ErrValidation)
	}
	if ch.Actor == "" {
		return fmt.Errorf("%w: actor is required", fault.ErrValidation)
	}
	return ch.Document.Validate()
}

// Apply writes a new control version when expected version matches the
// current one, with actor, request, reason, before and after in the same
// transaction. Re-sending the same change with the same key returns the
// version it created (replayed true); another change under that key is
// ErrKeyReused.
func (s *Service) Apply(ctx context.Context, ch Change) (Control, bool, error) {
	if err := ch.validate(); err != nil {
		return Control{}, false, err
	}
	doc := ch.Document.Canonical()
	var out Control
	replayed := false
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		if err := lockControl(ctx, tx); err != nil {
			return err
		}
		if prior, err := controlByKey(ctx, tx, ch.IdempotencyKey); err != nil {
			return err
		} else if prior != nil {
			stored, err := Parse(prior.Document)
			if err != nil {
				return err
			}
			if !bytes.Equal(stored.Canonical(), doc) || prior.Version != ch.ExpectedVersion+1 {
				return ErrKeyReused
			}
			stored.Version, out, replayed = prior.Version, stored, true
			return nil
		}
		// The raw latest document, even a malformed one, so an operator can
		// replace a broken control by naming its version.
		currentVersion, before, err := latestControl(ctx, tx)
		if err != nil {
			return err
		}
		if currentVersion != ch.ExpectedVersion {
			return ErrVersionConflict
		}
		out = ch.Document
		out.Version = currentVersion + 1
		return insertControl(ctx, tx, out.Version, doc, before, ch)
	})
	return out, replayed, err
}

// SuspendInput suspends an organization, or one workspace of it.
type SuspendInput struct {
	Actor          string
	RequestID      string
	IdempotencyKey string
	OrganizationID string
	WorkspaceID    string
	Reason         string
}

// Suspend records a tenant-scoped suspension and its audit evidence in the
// tenant's trail. The same key returns the same suspension.
func (s *Service) Suspend(ctx context.Context, in SuspendInput) (SuspensionRecord, error) {
	if err := idempotency.ValidateKey(in.IdempotencyKey); err != nil {
		return SuspensionRecord{}, err
	}
	reason := strings.TrimSpace(in.Reason)
	if reason == "" || len(reason) > 500 || in.Actor == "" {
		return SuspensionRecord{}, fmt.Errorf("%w: reason (1-500 characters) and actor are required", fault.ErrValidation)
	}
	var out SuspensionRecord
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		if prior, err := suspensionByKey(ctx, tx, in.IdempotencyKey); err != nil {
			return err
		} else if prior != nil {
			if prior.OrganizationID != in.OrganizationID || deref(prior.WorkspaceID) != in.WorkspaceID || prior.Reason != reason {
				return ErrKeyReused
			}
			out = *prior
			return nil
		}
		ok, err := organizationExists(ctx, tx, in.OrganizationID, in.WorkspaceID)
		if err != nil {
			return err
		}
		if !ok {
			return fault.ErrNotFound
		}
		out = SuspensionRecord{
			ID: id.New("sus"), OrganizationID: in.OrganizationID, Reason: reason, Actor: in.Actor,
			CreatedAt: time.Now().UTC().Truncate(time.Microsecond), IdempotencyKey: in.IdempotencyKey,
		}
		if in.WorkspaceID != "" {
			out.WorkspaceID = &in.WorkspaceID
		}
		if err := insertSuspension(ctx, tx, out, in.RequestID); err != nil {
			return err
		}
		return appendOperatorEvent(ctx, tx, in.OrganizationID, in.Actor, "launch.suspended", out.ID,
			map[string]any{"workspace_id": in.WorkspaceID, "reason": reason})
	})
	return out, err
}

// Lift ends a suspension (idempotently).
func (s *Service) Lift(ctx context.Context, actor, suspensionID string) (SuspensionRecord, error) {
	var out SuspensionRecord
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		r, err := suspensionByID(ctx, tx, suspensionID)
		if err != nil {
			return err
		}
		out = r
		if r.LiftedAt != nil {
			return nil
		}
		if err := liftSuspension(ctx, tx, r.ID, actor); err != nil {
			return err
		}
		now := time.Now().UTC()
		out.LiftedAt, out.LiftedBy = &now, &actor
		return appendOperatorEvent(ctx, tx, r.OrganizationID, actor, "launch.suspension_lifted", r.ID,
			map[string]any{"workspace_id": deref(r.WorkspaceID)})
	})
	return out, err
}

func appendOperatorEvent(ctx context.Context, tx *sqlx.Tx, organizationID, actor, action, suspensionID string, evidence map[string]any) error {
	_, err := audit.Append(ctx, tx, audit.Entry{
		OrganizationID: organizationID, Action: action,
		Actor:      audit.Actor{Type: audit.ActorOperator, ID: actor},
		TargetType: "suspension", TargetID: suspensionID, Evidence: evidence,
	})
	return err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
