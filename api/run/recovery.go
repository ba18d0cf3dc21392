package run

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/id"
)

// RecoveryLease is how long a recovery belongs to the principal that
// prepared it (SPEC §8).
const RecoveryLease = 15 * time.Minute

// Recovery resolutions.
const (
	ResolutionCurrentStateVerified = "current_state_verified"
	ResolutionImportEmergencyState = "import_emergency_state"
)

// RecoverInput is a recovery request. Evidence names what the caller was
// shown: the workspace's current state (ID and SHA-256) and, to import,
// the emergency state's SHA-256.
type RecoverInput struct {
	Resolution            string
	CurrentStateVersionID *string
	CurrentStateDigest    string
	EmergencyStateDigest  string
	Reason                string
	ConfirmFenceAdvance   bool
	ConfirmTakeover       bool
}

// Recovery is a run's recovery record.
type Recovery struct {
	ID                   string     `db:"id"`
	OrganizationID       string     `db:"organization_id"`
	RunID                string     `db:"run_id"`
	Resolution           string     `db:"resolution"`
	EvidenceDigest       []byte     `db:"evidence_digest"`
	HolderID             string     `db:"holder_id"`
	Fence                int        `db:"fence"`
	LeaseExpiresAt       time.Time  `db:"lease_expires_at"`
	Status               string     `db:"status"`
	TargetStateVersionID *string    `db:"target_state_version_id"`
	CreatedAt            time.Time  `db:"created_at"`
	ResolvedAt           *time.Time `db:"resolved_at"`
	// LeaseRemaining is derived from the database clock when read.
	LeaseRemaining int `db:"lease_remaining"`
}

func (in RecoverInput) validate() error {
	switch _, reasonErr := ReasonOf(in.Reason); {
	case in.Resolution != ResolutionCurrentStateVerified && in.Resolution != ResolutionImportEmergencyState:
		return fmt.Errorf("%w: resolution must be current_state_verified or import_emergency_state", ErrInvalid)
	case reasonErr != nil:
		return reasonErr
	case !in.ConfirmFenceAdvance:
		return ErrRecoveryConfirmation
	case in.Resolution == ResolutionImportEmergencyState && in.EmergencyStateDigest == "":
		return fmt.Errorf("%w: emergency_state_digest is required to import", ErrInvalid)
	}
	return nil
}

// evidenceDigest binds the resolution to exactly the evidence shown.
func (in RecoverInput) evidenceDigest() []byte {
	doc, _ := json.Marshal(map[string]any{"resolution": in.Resolution, "current_state_version_id": in.CurrentStateVersionID,
		"current_state_digest": in.CurrentStateDigest, "emergency_state_digest": in.EmergencyStateDigest})
	return Digest(doc)
}

const recoveryColumns = `id, organization_id, run_id, resolution, evidence_digest, holder_id, fence, lease_expires_at, status,
	target_state_version_id, created_at, resolved_at,
	greatest(0, least(900, ceil(extract(epoch FROM lease_expires_at - now()))))::int AS lease_remaining`

// RecoveryEvidence is what a recover request names, as recorded now: the
// workspace's current state and the emergency state the apply left.
type RecoveryEvidence struct {
	// CurrentStateVersionID is nil before the workspace's first state.
	CurrentStateVersionID *string
	CurrentStateDigest    []byte
	// EmergencyState is nil when the apply left none.
	EmergencyState *Artifact
}

// EvidenceOf returns the run's recovery evidence, read through q.
func (s *Service) EvidenceOf(ctx context.Context, q sqlx.QueryerContext, r Run) (RecoveryEvidence, error) {
	current, err := currentState(ctx, q, r.WorkspaceID)
	if err != nil {
		return RecoveryEvidence{}, err
	}
	ev := RecoveryEvidence{CurrentStateVersionID: current.ID, CurrentStateDigest: current.SHA256}
	art, err := artifactOf(ctx, q, r.ID, ArtifactEmergencyState)
	switch {
	case err == nil:
		ev.EmergencyState = &art
	case !errors.Is(err, ErrArtifactUnavailable):
		return RecoveryEvidence{}, err
	}
	return ev, nil
}

// RecoveryOf returns the run's recovery record read through q, or nil.
func (s *Service) RecoveryOf(ctx context.Context, q sqlx.QueryerContext, runID string) (*Recovery, error) {
	var rec Recovery
	err := sqlx.GetContext(ctx, q, &rec, `SELECT `+recoveryColumns+` FROM run_recoveries WHERE run_id = $1`, runID)
	if err != nil {
		if isNoRows(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading recovery: %w", err)
	}
	return &rec, nil
}

// Recover resolves a run whose apply outcome is uncertain, without ever
// re-running the apply. It prepares (or resumes, or takes over) a
// 15-minute recovery lease, does the resolution's work, and resolves, so a
// caller that lost a response resumes the same recovery, and a second
// caller cannot interfere until the lease expires. settle runs inside the
// resolving transaction with the recovered run, so whatever it writes (the
// caller's idempotent answer) commits exactly with the resolution.
func (s *Service) Recover(ctx context.Context, p access.Principal, runID string, in RecoverInput,
	settle func(ctx context.Context, tx *sqlx.Tx, r Run) error,
) (Run, error) {
	if err := p.Require(access.PermRunRecover); err != nil {
		return Run{}, err
	}
	if err := p.Require(access.PermStateRecover); err != nil {
		return Run{}, err
	}
	if err := p.RequireStepUp(s.now()); err != nil {
		return Run{}, err
	}
	if err := in.validate(); err != nil {
		return Run{}, err
	}
	evidence := in.evidenceDigest()
	var rec Recovery
	var r Run
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var err error
		if r, err = visibleRun(ctx, tx, p, runID, access.PermRunRecover, true); err != nil {
			return err
		}
		if err := requireIn(p, r, access.PermStateRecover); err != nil {
			return err
		}
		if r.Status != StatusRecoveryRequired {
			return ErrActionNotAllowed
		}
		if rec, err = s.leaseRecovery(ctx, tx, p, r, in, evidence); err != nil {
			return err
		}
		return s.checkEvidence(ctx, tx, r, in, rec)
	})
	if err != nil {
		return Run{}, err
	}
	var target *string
	if in.Resolution == ResolutionImportEmergencyState {
		art, err := artifactOf(ctx, s.db, r.ID, ArtifactEmergencyState)
		if err != nil {
			return Run{}, err
		}
		v, err := s.state.ImportRecovered(ctx, p, r.WorkspaceID, r.ID, importedVersionID(rec.ID),
			func() (io.ReadCloser, error) { return s.openArtifactRow(ctx, art) })
		if err != nil {
			return Run{}, fmt.Errorf("importing emergency state: %w", err)
		}
		target = &v.ID
	}
	err = db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var err error
		if r, err = visibleRun(ctx, tx, p, runID, access.PermRunRecover, true); err != nil {
			return err
		}
		if err := requireIn(p, r, access.PermStateRecover); err != nil {
			return err
		}
		var fence int
		if err := tx.GetContext(ctx, &fence, `SELECT fence FROM run_recoveries WHERE id = $1 AND holder_id = $2 AND status = 'prepared' FOR UPDATE`,
			rec.ID, p.ID); err != nil || fence != rec.Fence || r.Status != StatusRecoveryRequired {
			// Someone took over after our lease expired: we are fenced.
			return ErrRecoveryLeaseHeld
		}
		if _, err := tx.ExecContext(ctx, `UPDATE run_recoveries SET status = 'resolved', resolved_at = now(),
			target_state_version_id = $2 WHERE id = $1`, rec.ID, target); err != nil {
			return fmt.Errorf("resolving recovery: %w", err)
		}
		if target != nil {
			r.StateVersionID = target
		}
		if r, err = s.finish(ctx, tx, r, StatusRecovered, in.Resolution); err != nil {
			return err
		}
		ev := map[string]any{"recovery_id": rec.ID, "resolution": in.Resolution, "fence": rec.Fence}
		if target != nil {
			ev["state_version_id"] = *target
		}
		if err := audit.Record(ctx, tx, p, "run.recovered", "run", r.ID, ev); err != nil {
			return err
		}
		return settle(ctx, tx, r)
	})
	return r, err
}

// importedVersionID is the ID of the state version a recovery imports:
// derived from the recovery, so a recovery that resumes (its resolving
// transaction failed after the import, a response was lost, its lease was
// taken over) finds the version it already imported instead of importing
// a second one.
func importedVersionID(recoveryID string) string {
	return id.Derived("sv", []byte("cairn/recovery-import/"+recoveryID))
}

// checkEvidence compares what the caller saw with what is recorded now.
// Once the recovery's own import is the current state, the current state
// the caller saw is the one before it: the lease binds the request to the
// evidence the recovery was prepared with, which was checked then.
func (s *Service) checkEvidence(ctx context.Context, tx *sqlx.Tx, r Run, in RecoverInput, rec Recovery) error {
	current, err := currentState(ctx, tx, r.WorkspaceID)
	if err != nil {
		return err
	}
	imported := in.Resolution == ResolutionImportEmergencyState && current.ID != nil && *current.ID == importedVersionID(rec.ID)
	if !imported && (!sameStateID(current.ID, in.CurrentStateVersionID) || hex.EncodeToString(current.SHA256) != strings.ToLower(in.CurrentStateDigest)) {
		return ErrRecoveryEvidence
	}
	if in.Resolution == ResolutionImportEmergencyState {
		art, err := artifactOf(ctx, tx, r.ID, ArtifactEmergencyState)
		if err != nil || hex.EncodeToString(art.SHA256) != strings.ToLower(in.EmergencyStateDigest) {
			return ErrRecoveryEvidence
		}
	}
	return nil
}

// leaseRecovery prepares, resumes or takes over the run's recovery.
func (s *Service) leaseRecovery(ctx context.Context, tx *sqlx.Tx, p access.Principal, r Run, in RecoverInput, evidence []byte) (Recovery, error) {
	var rec Recovery
	err := tx.GetContext(ctx, &rec, `SELECT `+recoveryColumns+` FROM run_recoveries WHERE run_id = $1 FOR UPDATE`, r.ID)
	switch {
	case isNoRows(err):
		rec = Recovery{ID: id.New("rcv"), OrganizationID: r.OrganizationID, RunID: r.ID, Resolution: in.Resolution,
			EvidenceDigest: evidence, HolderID: p.ID, Fence: 1}
		_, err = tx.ExecContext(ctx, `INSERT INTO run_recoveries (id, organization_id, run_id, resolution, evidence_digest,
			holder_id, fence, lease_expires_at) VALUES ($1, $2, $3, $4, $5, $6, 1, now() + make_interval(secs => $7))`,
			rec.ID, rec.OrganizationID, rec.RunID, rec.Resolution, rec.EvidenceDigest, rec.HolderID, RecoveryLease.Seconds())
		if err != nil {
			return Recovery{}, fmt.Errorf("preparing recovery: %w", err)
		}
		return rec, audit.Record(ctx, tx, p, "run.recovery_prepared", "run", r.ID, map[string]any{"recovery_id": rec.ID, "resolution": in.Resolution})
	case err != nil:
		return Recovery{}, fmt.Errorf("reading recovery: %w", err)
	}
	if rec.Resolution != in.Resolution || hex.EncodeToString(rec.EvidenceDigest) != hex.EncodeToString(evidence) {
		return Recovery{}, ErrRecoveryEvidence
	}
	if rec.HolderID == p.ID {
		return rec, nil
	}
	if rec.LeaseRemaining > 0 || !in.ConfirmTakeover {
		return Recovery{}, ErrRecoveryLeaseHeld
	}
	previous := rec.HolderID
	rec.HolderID, rec.Fence = p.ID, rec.Fence+1
	if _, err := tx.ExecContext(ctx, `UPDATE run_recoveries SET holder_id = $2, fence = $3,
		lease_expires_at = now() + make_interval(secs => $4) WHERE id = $1`, rec.ID, rec.HolderID, rec.Fence, RecoveryLease.Seconds()); err != nil {
		return Recovery{}, fmt.Errorf("taking over recovery: %w", err)
	}
	return rec, audit.Record(ctx, tx, p, "run.recovery_taken_over", "run", r.ID, map[string]any{
		"recovery_id": rec.ID, "previous_holder_id": previous, "fence": rec.Fence})
}
