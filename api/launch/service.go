package launch

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
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
// in one round trip, and decides by Admit. Any read failure, and a
// malformed control, is a refusal.
func (s *Service) Decide(ctx context.Context, q sqlx.QueryerContext, subject Subject) Decision {
	return s.DecideBy(ctx, q, subject, Admit)
}

// DecideBy is Decide with another rule, such as AdmitNewRun or AdmitApply.
func (s *Service) DecideBy(ctx context.Context, q sqlx.QueryerContext, subject Subject, rule Rule) Decision {
	return s.decideAll(ctx, q, subject, rule)
}

// decideAll is DecideBy for every rule at once, from one reading of the
// facts: the first refusal, or the last rule's admission.
func (s *Service) decideAll(ctx context.Context, q sqlx.QueryerContext, subject Subject, rules ...Rule) Decision {
	if q == nil {
		q = s.db
	}
	facts, err := admissionFacts(ctx, q, subject)
	if err != nil {
		s.logger.WarnContext(ctx, "launch control unreadable: refusing", "error", err)
		return Decision{Reason: "control_unreadable"}
	}
	return s.decideOn(ctx, q, facts, subject, rules...)
}

// decideOn judges subject by rules on facts read for it.
func (s *Service) decideOn(ctx context.Context, q sqlx.QueryerContext, facts Facts, subject Subject, rules ...Rule) Decision {
	susp := Suspension{Organization: facts.OrganizationSuspended, Workspace: facts.WorkspaceSuspended}
	control, err := s.controlAt(ctx, q, facts.Version)
	if err != nil {
		s.logger.WarnContext(ctx, "launch control unreadable: refusing", "error", err)
		return Decision{Reason: "control_unreadable"}
	}
	var d Decision
	for _, rule := range rules {
		if d = rule(control, subject, susp); !d.Admitted {
			return d
		}
	}
	return d
}

// controlAt returns the control of the given version in force (nil for 0,
// when none exists). Versions are immutable, so a version parsed before
// is never read again.
func (s *Service) controlAt(ctx context.Context, q sqlx.QueryerContext, version int) (*Control, error) {
	if version == 0 {
		return nil, nil
	}
	control := s.parsed.Load()
	if control != nil && control.Version == version {
		return control, nil
	}
	control, err := currentControl(ctx, q)
	if err != nil {
		return nil, err
	}
	if control == nil {
		return nil, ErrMalformed
	}
	s.parsed.Store(control)
	return control, nil
}

// inForce returns the control in force (nil when none exists).
func (s *Service) inForce(ctx context.Context, q sqlx.QueryerContext) (*Control, error) {
	version, err := latestVersion(ctx, q)
	if err != nil {
		return nil, err
	}
	return s.controlAt(ctx, q, version)
}

// Require is Decide that returns fault.ErrAdmissionClosed on refusal.
func (s *Service) Require(ctx context.Context, q sqlx.QueryerContext, subject Subject) (Decision, error) {
	return s.RequireBy(ctx, q, subject, Admit)
}

// RequireBy is DecideBy that returns fault.ErrAdmissionClosed on refusal;
// given several rules, it requires them all, reading the facts once.
func (s *Service) RequireBy(ctx context.Context, q sqlx.QueryerContext, subject Subject, rule Rule, more ...Rule) (Decision, error) {
	return s.require(ctx, s.decideAll(ctx, q, subject, append([]Rule{rule}, more...)...), subject)
}

// require turns a refusal into fault.ErrAdmissionClosed.
func (s *Service) require(ctx context.Context, d Decision, subject Subject) (Decision, error) {
	if !d.Admitted {
		s.logger.DebugContext(ctx, "admission refused", "organization_id", subject.OrganizationID,
			"workspace_id", subject.WorkspaceID, "reason", d.Reason)
		return d, fault.ErrAdmissionClosed
	}
	return d, nil
}

// RequireFrom is RequireBy on facts the caller read beside the subject
// itself (FactsColumns), in the same statement: it reads nothing more
// unless the control of that version was never parsed.
func (s *Service) RequireFrom(ctx context.Context, facts Facts, subject Subject, rule Rule, more ...Rule) (Decision, error) {
	return s.require(ctx, s.decideOn(ctx, s.db, facts, subject, append([]Rule{rule}, more...)...), subject)
}

// Queue is the queue the control in force routes a workflow kind to, for
// jobs inserted in the caller's transaction q. Without a readable control
// it is "", which leaves the job on its built-in queue: routing is not
// admission, nothing starts without a control anyway (every start
// rechecks admission), and a run finishing or recovering must not fail
// because the control is broken.
func (s *Service) Queue(ctx context.Context, q sqlx.QueryerContext, kind string) string {
	if q == nil {
		q = s.db
	}
	control, err := s.inForce(ctx, q)
	if err != nil {
		s.logger.WarnContext(ctx, "launch control unreadable: jobs keep their built-in queue", "kind", kind, "error", err)
		return ""
	}
	return control.Queue(kind)
}

// Current returns the control in force (nil when none exists).
func (s *Service) Current(ctx context.Context) (*Control, error) {
	return currentControl(ctx, s.db)
}

// ChangeByKey returns the control version written under an idempotency
// key (nil when none was), so a command that derives its change from the
// control in force can retry exactly the change it made.
func (s *Service) ChangeByKey(ctx context.Context, key string) (*Control, error) {
	row, err := controlByKey(ctx, s.db, key)
	if err != nil || row == nil {
		return nil, err
	}
	c, err := Parse(row.Document)
	if err != nil {
		return nil, err
	}
	c.Version = row.Version
	return &c, nil
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
// version it created (replayed true); another change under that key (a
// different document, expected version or reason) is ErrKeyReused.
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
			// Everything the change carries is its input: document,
			// expected version and reason.
			if !bytes.Equal(stored.Canonical(), doc) || prior.Version != ch.ExpectedVersion+1 || prior.Reason != ch.Reason {
				return ErrKeyReused
			}
			// Assigned one after the other: in one tuple assignment out
			// would get stored before its version is set.
			stored.Version = prior.Version
			out, replayed = stored, true
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
