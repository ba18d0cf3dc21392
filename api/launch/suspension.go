package launch

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/platform/idempotency"
)

// SuspensionChange is one operator request to suspend, or lift the
// suspension of, a tenant subject: an organization (WorkspaceID empty) or
// one workspace of it. Like a control change it names the version it
// replaces (0 before the subject's first change) and carries an
// idempotency key and a reason.
type SuspensionChange struct {
	Actor           string
	RequestID       string
	IdempotencyKey  string
	OrganizationID  string
	WorkspaceID     string
	ExpectedVersion int
	Reason          string
}

// SuspensionRecord is one immutable change of a subject's suspension, with
// the state before and after it. Reason is the operator's private note: it
// is kept here and never copied into the tenant's audit trail.
type SuspensionRecord struct {
	ID              string    `db:"id" json:"id"`
	OrganizationID  string    `db:"organization_id" json:"organization_id"`
	WorkspaceID     string    `db:"workspace_id" json:"workspace_id"`
	Version         int       `db:"version" json:"version"`
	SuspendedBefore bool      `db:"suspended_before" json:"suspended_before"`
	Suspended       bool      `db:"suspended" json:"suspended"`
	Reason          string    `db:"reason" json:"reason"`
	Actor           string    `db:"actor" json:"actor"`
	RequestID       string    `db:"request_id" json:"request_id"`
	CreatedAt       time.Time `db:"created_at" json:"created_at"`
	IdempotencyKey  string    `db:"idempotency_key" json:"-"`
}

// SuspensionState is a subject's suspension now and its history, newest
// first. Version 0 means it was never suspended.
type SuspensionState struct {
	OrganizationID string             `json:"organization_id"`
	WorkspaceID    string             `json:"workspace_id"`
	Version        int                `json:"version"`
	Suspended      bool               `json:"suspended"`
	Changes        []SuspensionRecord `json:"changes"`
}

func (ch SuspensionChange) validate() error {
	if err := idempotency.ValidateKey(ch.IdempotencyKey); err != nil {
		return err
	}
	if r := strings.TrimSpace(ch.Reason); r == "" || len(r) > 500 {
		return fmt.Errorf("%w: reason must be 1-500 characters", fault.ErrValidation)
	}
	if ch.Actor == "" {
		return fmt.Errorf("%w: actor is required", fault.ErrValidation)
	}
	if !id.HasPrefix(ch.OrganizationID, "org") || (ch.WorkspaceID != "" && !id.HasPrefix(ch.WorkspaceID, "ws")) {
		return fmt.Errorf("%w: an organization ID and, for one workspace, its workspace ID are required", fault.ErrValidation)
	}
	if ch.ExpectedVersion < 0 {
		return fmt.Errorf("%w: expected version must be 0 or more", fault.ErrValidation)
	}
	return nil
}

// Suspend suspends the subject: its protected mutations are refused with
// the non-disclosing 503 until the suspension is lifted; reads,
// cancellation and recovery go on (SPEC §1 rule 7).
func (s *Service) Suspend(ctx context.Context, ch SuspensionChange) (SuspensionRecord, bool, error) {
	return s.changeSuspension(ctx, ch, true)
}

// Lift ends the subject's suspension.
func (s *Service) Lift(ctx context.Context, ch SuspensionChange) (SuspensionRecord, bool, error) {
	return s.changeSuspension(ctx, ch, false)
}

// changeSuspension writes the next version of the subject's suspension
// when the expected version is current, with its before-and-after evidence
// and the tenant's audit event, in one transaction. The same key with the
// same change returns the first answer (replayed true); the key with any
// other change is ErrKeyReused.
func (s *Service) changeSuspension(ctx context.Context, ch SuspensionChange, suspend bool) (SuspensionRecord, bool, error) {
	if err := ch.validate(); err != nil {
		return SuspensionRecord{}, false, err
	}
	reason := strings.TrimSpace(ch.Reason)
	var out SuspensionRecord
	replayed := false
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		if err := lockSubject(ctx, tx, ch.OrganizationID, ch.WorkspaceID); err != nil {
			return err
		}
		if prior, err := suspensionByKey(ctx, tx, ch.IdempotencyKey); err != nil {
			return err
		} else if prior != nil {
			if prior.OrganizationID != ch.OrganizationID || prior.WorkspaceID != ch.WorkspaceID || prior.Suspended != suspend ||
				prior.Version != ch.ExpectedVersion+1 || prior.Reason != reason {
				return ErrKeyReused
			}
			out, replayed = *prior, true
			return nil
		}
		version, suspended, err := currentSuspension(ctx, tx, ch.OrganizationID, ch.WorkspaceID)
		if err != nil {
			return err
		}
		if version != ch.ExpectedVersion {
			return ErrSuspensionVersionConflict
		}
		if suspended == suspend {
			return ErrSuspensionUnchanged
		}
		exists, err := subjectExists(ctx, tx, ch.OrganizationID, ch.WorkspaceID)
		if err != nil {
			return err
		}
		// A deleted tenant cannot be suspended; its history stays, and a
		// suspension it was deleted under can still be lifted.
		if !exists && suspend {
			return fault.ErrNotFound
		}
		out = SuspensionRecord{
			ID: id.New("sus"), OrganizationID: ch.OrganizationID, WorkspaceID: ch.WorkspaceID, Version: version + 1,
			SuspendedBefore: suspended, Suspended: suspend, Reason: reason, Actor: ch.Actor, RequestID: ch.RequestID,
			CreatedAt: time.Now().UTC().Truncate(time.Microsecond), IdempotencyKey: ch.IdempotencyKey,
		}
		if err := insertSuspension(ctx, tx, out); err != nil {
			return err
		}
		if !exists {
			return nil
		}
		action := "launch.suspended"
		if !suspend {
			action = "launch.suspension_lifted"
		}
		// The tenant sees that and when, never the operator's reason.
		_, err = audit.Append(ctx, tx, audit.Entry{
			OrganizationID: ch.OrganizationID, Action: action,
			Actor:      audit.Actor{Type: audit.ActorOperator, ID: ch.Actor},
			TargetType: "suspension", TargetID: out.ID,
			Evidence: map[string]any{"workspace_id": ch.WorkspaceID, "version": out.Version,
				"suspended_before": out.SuspendedBefore, "suspended": out.Suspended},
		})
		return err
	})
	return out, replayed, err
}

// Suspensions returns a subject's suspension state and its history.
func (s *Service) Suspensions(ctx context.Context, organizationID, workspaceID string) (SuspensionState, error) {
	changes, err := suspensionHistory(ctx, s.db, organizationID, workspaceID)
	if err != nil {
		return SuspensionState{}, err
	}
	state := SuspensionState{OrganizationID: organizationID, WorkspaceID: workspaceID, Changes: changes}
	if len(changes) > 0 {
		state.Version, state.Suspended = changes[0].Version, changes[0].Suspended
	}
	return state, nil
}
