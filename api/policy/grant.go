package policy

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/policy/rego"
)

// Bundle grants (SPEC §4): a sandboxed evaluation reads its bundle from
// cairn-api through a URL that carries no credential, only a stateless
// HMAC grant bound to the plan attempt and discriminated by the query
// ?evaluation={sequence}. The grant is signed with the capability key
// state uploads and logs use, retriable until its deadline, and worth
// nothing once the attempt stops running.

// BundleGrantPath is the path of an attempt's bundle grants.
func BundleGrantPath(attemptID string) string {
	return "/api/v2/run-attempts/" + attemptID + "/policy-bundle"
}

// grantResource is what a grant signs: the path and its evaluation query.
func grantResource(attemptID string, sequence int) string {
	return BundleGrantPath(attemptID) + "?evaluation=" + strconv.Itoa(sequence)
}

// BundleGrant signs the grant of one evaluation of a plan attempt, good
// until deadline, and returns its path and query relative to the API's
// origin.
func (s *Service) BundleGrant(attemptID string, sequence int, deadline time.Time) string {
	resource := grantResource(attemptID, sequence)
	return resource + "&" + s.opts.Capabilities.QueryUntil(http.MethodGet, resource, deadline)
}

// bundleGrant is BundleGrant for one evaluation, signed when its process
// starts.
func (s *Service) bundleGrant(attemptID string, sequence int) func(deadline time.Time) string {
	return func(deadline time.Time) string { return s.BundleGrant(attemptID, sequence, deadline) }
}

// BundleGrant is a grant as a request presents it.
type BundleGrant struct {
	AttemptID  string
	Evaluation string
	Expires    string
	Signature  string
}

// CheckBundleGrant returns the evaluation sequence of a grant whose
// signature holds (compared in constant time) and whose deadline has not
// passed. The sequence must be written as the grant wrote it (no sign, no
// leading zero), so one grant has exactly one spelling.
func (s *Service) CheckBundleGrant(g BundleGrant, now time.Time) (int, bool) {
	seq, err := strconv.Atoi(g.Evaluation)
	if err != nil || seq < 1 || seq > MaxAttachmentsPerRun || strconv.Itoa(seq) != g.Evaluation || g.AttemptID == "" {
		return 0, false
	}
	if !s.opts.Capabilities.Valid(http.MethodGet, grantResource(g.AttemptID, seq), g.Expires, g.Signature, now) {
		return 0, false
	}
	return seq, true
}

// SnapshotEntryOf returns the attachment a run snapshotted at sequence,
// or fault.ErrNotFound.
func SnapshotEntryOf(ctx context.Context, q sqlx.QueryerContext, runID string, sequence int) (SnapshotEntry, error) {
	var e SnapshotEntry
	err := sqlx.GetContext(ctx, q, &e, `SELECT run_id, sequence, attachment_id, policy_set_id, policy_version_id,
		scope, enforcement_mode, bundle_sha256 FROM run_policy_snapshots WHERE run_id = $1 AND sequence = $2`, runID, sequence)
	if errors.Is(err, sql.ErrNoRows) {
		return SnapshotEntry{}, fault.ErrNotFound
	}
	if err != nil {
		return SnapshotEntry{}, fmt.Errorf("reading policy snapshot entry: %w", err)
	}
	return e, nil
}

// OpenSnapshotBundle streams the sealed bundle of a snapshotted
// attachment and its size, withholding the end unless the bytes hash to
// the snapshotted digest. A committed bundle whose digest is not the
// snapshot's is fault.ErrConflict, final; one that cannot be opened is
// fault.ErrUnavailable, and the grant's holder may retry until its
// deadline.
func (s *Service) OpenSnapshotBundle(ctx context.Context, organizationID string, e SnapshotEntry) (io.ReadCloser, int64, error) {
	rc, size, err := s.openBundle(ctx, organizationID, e)
	if err != nil {
		s.logger.WarnContext(ctx, "policy bundle unavailable", "run_id", e.RunID, "policy_version_id", e.PolicyVersionID, "error", err)
		if rego.CodeOf(err) == codeBundleMismatch {
			return nil, 0, fmt.Errorf("%w: policy bundle differs from the snapshot", fault.ErrConflict)
		}
		return nil, 0, fmt.Errorf("%w: policy bundle", fault.ErrUnavailable)
	}
	return rc, size, nil
}
