package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/credential"
	"github.com/cairnhq/cairn/api/platform/db"
)

// ErrCredentialsUnavailable means a phase could not get the credentials its
// run pinned (a version revoked, a profile archived, a provider switched
// off, a snapshot that failed): the run ended, a plan as
// plan_credentials_required, and no sandbox received anything.
var ErrCredentialsUnavailable = errors.New("run credentials unavailable")

// credentialPhase is the run phase an attempt's credentials serve: a
// speculative run's plan has a subject of its own.
func credentialPhase(r Run, a Attempt) string {
	switch {
	case a.Phase == PhaseApply:
		return credential.RunPhaseApply
	case r.Speculative():
		return credential.RunPhaseSpeculativePlan
	}
	return credential.RunPhasePlan
}

// issueCredentials runs in the sandbox-create intent: it issues the
// attempt's one-time handle for the versions the run pinned, rechecked
// now. A non-empty reason means they cannot be issued and the phase must
// not start.
func (s *Service) issueCredentials(ctx context.Context, tx *sqlx.Tx, r Run, a Attempt) (*credential.Grant, string, error) {
	if r.CredentialSnapshotError != nil {
		return nil, *r.CredentialSnapshotError, nil
	}
	var snap inputSnapshot
	if err := json.Unmarshal(r.InputSnapshot, &snap); err != nil {
		return nil, "", fmt.Errorf("decoding input snapshot: %w", err)
	}
	if len(snap.Credentials) == 0 {
		return nil, "", nil
	}
	// An untrusted run pins no credentials; one that names some anyway
	// gets none.
	if r.Untrusted() {
		return nil, credential.ReasonWithheld, nil
	}
	if s.creds == nil {
		return nil, credential.ReasonIssuerUnavailable, nil
	}
	g, err := s.creds.Issue(ctx, tx, credential.AttemptFacts{OrganizationID: r.OrganizationID, WorkspaceID: r.WorkspaceID,
		RunID: r.ID, AttemptID: a.ID, RunPhase: credentialPhase(r, a)}, snap.Credentials)
	if reason := credential.ReasonOf(err); reason != "" {
		return nil, reason, nil
	}
	return g, "", err
}

// refuseCredentials ends an attempt whose credentials are unavailable,
// before user code ran: a plan's run ends plan_credentials_required, an
// apply's errored (nothing was applied), both with the reason.
func (s *Service) refuseCredentials(ctx context.Context, tx *sqlx.Tx, r Run, a Attempt, reason string) error {
	if err := s.endAttempt(ctx, tx, &a, AttemptFailed, reason, -1, nil); err != nil {
		return err
	}
	var err error
	if a.Phase == PhasePlan {
		r.PlanStatus = PhaseErrored
		r, err = s.finish(ctx, tx, r, StatusCredentialsRequired, reason)
	} else {
		r.ApplyStatus = PhaseErrored
		r, err = s.finish(ctx, tx, r, StatusErrored, reason)
	}
	if err != nil {
		return err
	}
	return s.systemEvent(ctx, tx, r, "run.credentials_unavailable", map[string]any{"attempt_id": a.ID, "phase": a.Phase, "reason": reason})
}

// RedeemCredentials redeems the attempt's handle inside sandbox start, for
// a sandbox whose private directory commands see at dir. It returns the
// environment, files and secrets to hand to the sandbox; an unavailable
// credential is a credential.UnavailableError (see FailCredentials).
func (s *Service) RedeemCredentials(ctx context.Context, st Started, dir string) (credential.Materials, error) {
	if st.Credentials == nil {
		return credential.Materials{}, nil
	}
	if s.creds == nil {
		return credential.Materials{}, credential.UnavailableError{Reason: credential.ReasonIssuerUnavailable}
	}
	return s.creds.Redeem(ctx, *st.Credentials, dir)
}

// FailCredentials ends a running attempt whose credentials did not redeem
// (revoked or archived since issuance, the handle refused): before any
// user code ran, like refuseCredentials.
func (s *Service) FailCredentials(ctx context.Context, attemptID, reason string, profile *SandboxProfile) error {
	return db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		r, a, err := lockAttempt(ctx, tx, attemptID)
		if err != nil {
			return err
		}
		if a.Status != AttemptRunning || r.Status.Terminal() {
			return nil
		}
		if profile != nil {
			if _, err := tx.ExecContext(ctx, `UPDATE run_attempts SET sandbox_profile = $2 WHERE id = $1`, a.ID, *profile); err != nil {
				return fmt.Errorf("recording sandbox profile: %w", err)
			}
		}
		return s.refuseCredentials(ctx, tx, r, a, reason)
	})
}
