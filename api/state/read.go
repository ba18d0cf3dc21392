package state

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/platform/blobkey"
	"github.com/cairnhq/cairn/api/platform/fault"
)

// ReadBody opens a finalized version's raw state for the remote-backend
// API, where CLIs (every managed run's sandboxed one included) read state
// to plan against it. The state holds sensitive values in clear, so every
// release is audited: one insert, committed before the body is returned,
// naming the principal (a user, a service account, or a run for its run
// token) and the version.
func (s *Service) ReadBody(ctx context.Context, p access.Principal, versionID string) (io.ReadCloser, Version, error) {
	body, v, err := s.Download(ctx, p, versionID)
	if err != nil {
		return nil, Version{}, err
	}
	err = audit.Record(ctx, s.db, p, "state_version.downloaded", "state_version", v.ID,
		map[string]any{"workspace_id": v.WorkspaceID, "serial": v.Serial, "size_bytes": *v.Size})
	if err != nil {
		body.Close()
		return nil, Version{}, fmt.Errorf("auditing a state download: %w", err)
	}
	return body, v, nil
}

// releasable reports whether a version's record describes bytes that may
// be released: finalized, within the state limit, with a SHA-256, and
// stored under one of the version's own keys (one per upload; versions
// written before that have the single key of their ID).
func releasable(v Version) bool {
	if !v.Finalized() || v.Size == nil || *v.Size < 0 || *v.Size > MaxStateBytes || len(v.SHA256) != sha256.Size || v.BlobKey == nil {
		return false
	}
	return blobkey.OfStateVersion(*v.BlobKey, v.OrganizationID, v.WorkspaceID, v.ID)
}

// runMayRead confines a run token to what a plan or apply reads: its
// workspace's current version (the state it plans against), never an
// older one. The workspace boundary is checked by the caller, possibly at
// the same time: a version of a workspace the token may not read is
// refused by that check, whatever this one found.
func (s *Service) runMayRead(ctx context.Context, p access.Principal, v Version) error {
	if p.Kind != access.KindRun {
		return nil
	}
	current, err := currentVersion(ctx, s.db, v.OrganizationID, v.WorkspaceID)
	if err != nil {
		return err
	}
	if current == nil || current.ID != v.ID {
		return fault.ErrNotFound
	}
	return nil
}

// requireHistory admits a principal to a workspace's state history: one
// with state:read that is not a run token, which never reads versions
// other than the current one.
func requireHistory(p access.Principal) error {
	if p.Kind == access.KindRun {
		return fmt.Errorf("%w: a run token reads only the current state", fault.ErrForbidden)
	}
	return p.Require(access.PermStateRead)
}
