package policy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/dispatch"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/blobkey"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/policy/rego"
)

// QueuePolicy is the River queue of policy builds.
const QueuePolicy = "policy"

// DispatchPublication is the workflow kind of a version's build.
const DispatchPublication = "policy-publication"

// Reconciliation bounds (SPEC §8), the dispatch reconciler's.
const (
	ReconcileBatch    = dispatch.ReconcileBatch
	ReconcileClaim    = dispatch.ReconcileClaim
	ReconcileInterval = dispatch.ReconcileInterval
	// MaxStarts bounds redelivery: a source whose build keeps killing its
	// worker fails with an orchestration failure instead of being rebuilt
	// forever. Only builds that really started count; a job waiting in a
	// backlog is never a failed delivery.
	MaxStarts = 6
)

// PublicationArgs is a version's build job. The version row is the
// authority: a job for a version that is no longer pending does nothing.
type PublicationArgs struct {
	PolicyVersionID string `json:"policy_version_id"`
}

// Kind names the job.
func (PublicationArgs) Kind() string { return "policy_publication" }

// InsertOpts routes builds to their queue and keeps one live job per
// version, so a redelivery while the build runs is a no-op.
func (PublicationArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueuePolicy, MaxAttempts: 5, UniqueOpts: river.UniqueOpts{
		ByArgs: true,
		ByState: []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRetryable,
			rivertype.JobStateRunning, rivertype.JobStateScheduled},
	}}
}

// routed puts a build job on the queue launch control routes policy
// builds to; the rest of its options are PublicationArgs'.
func (s *Service) routed(ctx context.Context, tx *sqlx.Tx) *river.InsertOpts {
	return &river.InsertOpts{Queue: s.launch.Queue(ctx, tx, launch.WorkflowPolicy)}
}

// DispatchID is the deterministic workflow identity of a version's build.
func DispatchID(versionID string) string { return dispatch.ID(DispatchPublication, versionID) }

func (s *Service) dispatchPublication(ctx context.Context, tx *sqlx.Tx, v Version, now time.Time) error {
	if err := dispatch.Arm(ctx, tx, DispatchPublication, v.OrganizationID, v.ID, now); err != nil {
		return err
	}
	if _, err := s.jobs.InsertTx(ctx, tx.Tx, PublicationArgs{PolicyVersionID: v.ID}, s.routed(ctx, tx)); err != nil {
		return fmt.Errorf("dispatching policy build: %w", err)
	}
	return nil
}

// Backoff is the delay before the nth redelivery of a dispatch.
func Backoff(deliveries int) time.Duration { return dispatch.Backoff(deliveries) }

// ReconcileReport says what one reconciler tick did.
type ReconcileReport = dispatch.Report

// Reconcile runs one dispatch reconciler tick over policy publications
// alone, on the service's clock (the worker's tick covers every kind).
func (s *Service) Reconcile(ctx context.Context) (ReconcileReport, error) {
	return dispatch.Reconcile(ctx, s.db, s.stamp(), map[string]dispatch.Handler{DispatchPublication: s.Redeliver})
}

// Redeliver is the reconciler's handler of a version's build dispatch: a
// version that finished is settled; a live job (River's uniqueness finds it
// queued, scheduled, retrying or running) only waits its next backoff; a
// lost job is delivered again, unless its builds already started MaxStarts
// times, which fails the version.
func (s *Service) Redeliver(ctx context.Context, tx *sqlx.Tx, d dispatch.Record) (dispatch.Outcome, error) {
	v, err := versionByID(ctx, tx, d.OrganizationID, d.SubjectID, false)
	if err != nil {
		return 0, err
	}
	if v.Status != VersionPending {
		return dispatch.Settled, nil
	}
	res, err := s.jobs.InsertTx(ctx, tx.Tx, PublicationArgs{PolicyVersionID: v.ID}, s.routed(ctx, tx))
	if err != nil {
		return 0, fmt.Errorf("redelivering policy build: %w", err)
	}
	if res.UniqueSkippedAsDuplicate {
		return dispatch.Waiting, nil
	}
	if d.Starts >= MaxStarts {
		// The job just inserted finds the version failed and does
		// nothing.
		return dispatch.Failed, s.failInTx(ctx, tx, v, FailureOrchestration)
	}
	return dispatch.Redelivered, nil
}

// BuildJob is what a builder needs of a pending version.
type BuildJob struct {
	Version Version
	Source  Artifact
}

// StartBuild is a build's sandbox-create intent: in one transaction it
// finds the version still pending, rechecks launch admission of the build
// workspace (gate, suspension, the build region and the policy release)
// and takes a regional capacity lease, like a run phase does (SPEC §1
// rule 9). ok is false when the version is no longer pending (a replayed
// or redelivered job). A refused admission is ErrBuildNotAdmitted and a
// full region ErrBuildNoCapacity: nothing is written and the job waits.
// A replayed start finds the lease it already holds.
func (s *Service) StartBuild(ctx context.Context, versionID string) (BuildJob, bool, error) {
	var job BuildJob
	pending := false
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		v, err := versionByID(ctx, tx, "", versionID, true)
		if err != nil || v.Status != VersionPending {
			return err
		}
		subject := launch.Subject{OrganizationID: v.OrganizationID, WorkspaceID: v.WorkspaceID}
		if _, err := s.launch.RequireBy(ctx, tx, subject, launch.AdmitPolicyBuild(v.Region)); err != nil {
			return ErrBuildNotAdmitted
		}
		granted, err := s.launch.TakeLease(ctx, tx, v.Region, launch.LeaseHolder{PolicyVersionID: v.ID})
		if err != nil {
			return err
		}
		if !granted {
			return ErrBuildNoCapacity
		}
		if err := dispatch.Started(ctx, tx, DispatchID(v.ID)); err != nil {
			return err
		}
		src, err := artifactOf(ctx, tx, v.OrganizationID, v.ID, ArtifactSource)
		if err != nil {
			return err
		}
		job, pending = BuildJob{Version: v, Source: src}, true
		return nil
	})
	return job, pending, err
}

// PendingBuild returns a version's build job, or ok=false when the version
// is no longer pending (a replayed or redelivered job).
func (s *Service) PendingBuild(ctx context.Context, versionID string) (BuildJob, bool, error) {
	v, err := versionByID(ctx, s.db, "", versionID, false)
	if err != nil {
		return BuildJob{}, false, err
	}
	if v.Status != VersionPending {
		return BuildJob{}, false, nil
	}
	src, err := artifactOf(ctx, s.db, v.OrganizationID, v.ID, ArtifactSource)
	if err != nil {
		return BuildJob{}, false, err
	}
	return BuildJob{Version: v, Source: src}, true, nil
}

// OpenSource returns the plaintext source archive. The sealed object is
// bound to the source identity, so a swapped object fails to decrypt.
func (s *Service) OpenSource(ctx context.Context, job BuildJob) (io.ReadCloser, error) {
	blobs, err := s.storage()
	if err != nil {
		return nil, err
	}
	return blobs.Open(ctx, job.Source.BlobKey, job.Version.SourceIdentity)
}

func builtArtifactIdentity(organizationID, versionID, kind string) string {
	return "cairn/policy-version/" + organizationID + "/" + versionID + "/" + kind
}

// StoreBuildArtifact streams a build output (bundle or test results) into
// sealed storage and commits its row, so the completion can be checked
// against committed digests rather than claims.
func (s *Service) StoreBuildArtifact(ctx context.Context, v Version, kind string, r io.Reader) (Artifact, error) {
	blobs, err := s.storage()
	if err != nil {
		return Artifact{}, err
	}
	limit := int64(rego.MaxBundleBytes)
	if kind == ArtifactTestResults {
		limit = rego.MaxTestResultsBytes
	}
	a := Artifact{ID: id.New("pol"), OrganizationID: v.OrganizationID, PolicyVersionID: v.ID, Kind: kind,
		BlobKey: blobkey.PolicyArtifact(v.OrganizationID, v.ID), CreatedAt: s.stamp()}
	digests, err := blobs.Put(ctx, a.BlobKey, builtArtifactIdentity(v.OrganizationID, v.ID, kind), r, limit)
	if err != nil {
		return Artifact{}, err
	}
	a.SizeBytes, a.SHA256 = digests.Size, digests.SHA256
	// A retried build replaces what an earlier attempt of the same pending
	// version stored; a finished version's artifacts never change.
	err = db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		current, err := versionByID(ctx, tx, v.OrganizationID, v.ID, true)
		if err != nil || current.Status != VersionPending {
			return ErrCompletionConflict
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM policy_artifacts WHERE policy_version_id = $1 AND kind = $2`, v.ID, kind); err != nil {
			return fmt.Errorf("replacing policy artifact: %w", err)
		}
		return insertArtifact(ctx, tx, a)
	})
	if err != nil {
		_ = blobs.Delete(context.WithoutCancel(ctx), a.BlobKey)
		return Artifact{}, err
	}
	return a, nil
}

// Completion is a builder's claim that a version built. The API does not
// trust it: it re-reads the committed artifact rows and compares.
type Completion struct {
	OrganizationID        string
	PolicyVersionID       string
	SourceSHA256          []byte
	BundleArtifactID      string
	BundleSHA256          []byte
	TestResultsArtifactID string
	TestResultsSHA256     []byte
	TestsPassed           int
}

// CompleteBuild publishes a version atomically when every committed digest
// matches the completion. An identical completion of a published version
// is a replay; anything else that differs is ErrCompletionConflict.
func (s *Service) CompleteBuild(ctx context.Context, c Completion) (Version, error) {
	if c.OrganizationID == "" {
		return Version{}, ErrCompletionConflict
	}
	var out Version
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		v, err := versionByID(ctx, tx, c.OrganizationID, c.PolicyVersionID, true)
		if err != nil {
			return ErrCompletionConflict
		}
		bundle, err := artifactOf(ctx, tx, v.OrganizationID, v.ID, ArtifactBundle)
		if err != nil {
			return ErrCompletionConflict
		}
		results, err := artifactOf(ctx, tx, v.OrganizationID, v.ID, ArtifactTestResults)
		if err != nil {
			return ErrCompletionConflict
		}
		source, err := artifactOf(ctx, tx, v.OrganizationID, v.ID, ArtifactSource)
		if err != nil {
			return ErrCompletionConflict
		}
		matches := bytes.Equal(c.SourceSHA256, v.SourceSHA256) && bytes.Equal(source.SHA256, v.SourceSHA256) &&
			c.BundleArtifactID == bundle.ID && bytes.Equal(c.BundleSHA256, bundle.SHA256) &&
			c.TestResultsArtifactID == results.ID && bytes.Equal(c.TestResultsSHA256, results.SHA256)
		if !matches {
			return ErrCompletionConflict
		}
		if v.Status == VersionPublished && bytes.Equal(v.BundleSHA256, bundle.SHA256) &&
			bytes.Equal(v.TestResultsSHA256, results.SHA256) && v.TestsPassed != nil && *v.TestsPassed == c.TestsPassed {
			out = v
			return nil
		}
		if v.Status != VersionPending {
			return ErrCompletionConflict
		}
		now := s.stamp()
		passed := c.TestsPassed
		v.Status, v.BundleSHA256, v.TestResultsSHA256, v.TestsPassed, v.FinishedAt = VersionPublished, bundle.SHA256, results.SHA256, &passed, &now
		if err := finishVersion(ctx, tx, v); err != nil {
			return err
		}
		if err := dispatch.Complete(ctx, tx, DispatchID(v.ID), now); err != nil {
			return err
		}
		if err := launch.ReleaseLease(ctx, tx, launch.LeaseHolder{PolicyVersionID: v.ID}); err != nil {
			return err
		}
		out = v
		return s.builderEvent(ctx, tx, v, "policy_version.published", map[string]any{
			"bundle_sha256": fmt.Sprintf("%x", bundle.SHA256), "test_results_sha256": fmt.Sprintf("%x", results.SHA256),
			"tests_passed": passed,
		})
	})
	return out, err
}

// FailBuild records a build failure with its safe code. Failing a version
// that already failed with the same code is a replay.
func (s *Service) FailBuild(ctx context.Context, versionID, code string) (Version, error) {
	if !slices.Contains(FailureCodes, code) {
		code = FailureOrchestration
	}
	var out Version
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		v, err := versionByID(ctx, tx, "", versionID, true)
		if err != nil {
			return err
		}
		if v.Status == VersionFailed && v.FailureCode != nil && *v.FailureCode == code {
			out = v
			return nil
		}
		if v.Status != VersionPending {
			return ErrCompletionConflict
		}
		if err := s.failInTx(ctx, tx, v, code); err != nil {
			return err
		}
		out, err = versionByID(ctx, tx, "", versionID, false)
		return err
	})
	return out, err
}

// failInTx records a pending version's failure, completes its dispatch
// and releases its capacity lease in the caller's transaction.
func (s *Service) failInTx(ctx context.Context, tx *sqlx.Tx, v Version, code string) error {
	now := s.stamp()
	v.Status, v.FailureCode, v.FinishedAt = VersionFailed, &code, &now
	if err := finishVersion(ctx, tx, v); err != nil {
		return err
	}
	if err := dispatch.Complete(ctx, tx, DispatchID(v.ID), now); err != nil {
		return err
	}
	if err := launch.ReleaseLease(ctx, tx, launch.LeaseHolder{PolicyVersionID: v.ID}); err != nil {
		return err
	}
	return s.builderEvent(ctx, tx, v, "policy_version.failed", map[string]any{"failure_code": code})
}

func (s *Service) builderEvent(ctx context.Context, tx *sqlx.Tx, v Version, action string, evidence map[string]any) error {
	evidence["policy_set_id"], evidence["number"] = v.PolicySetID, v.Number
	_, err := audit.Append(ctx, tx, audit.Entry{OrganizationID: v.OrganizationID, Action: action,
		Actor: audit.Actor{Type: audit.ActorSystem, ID: "policy-builder"}, TargetType: "policy_version", TargetID: v.ID, Evidence: evidence})
	return err
}
