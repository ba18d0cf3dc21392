package workspace

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/seal"
)

// ErrSnapshotChanged means a variable a run pinned no longer has the value
// version it pinned, so the run cannot see the inputs it was created with.
var ErrSnapshotChanged = errors.New("pinned variable changed since the run was created")

// VariableRef is a variable as a run's input snapshot records it: identity,
// value version and keyed digest, never the value itself.
type VariableRef struct {
	ID           string `json:"id"`
	Key          string `json:"key"`
	Sensitive    bool   `json:"sensitive"`
	HCL          bool   `json:"hcl"`
	ValueVersion int    `json:"value_version"`
	ValueDigest  string `json:"value_digest"`
}

// SnapshotVariables lists the workspace's variables for a run snapshot,
// ordered by key so equal inputs give equal snapshot digests.
func SnapshotVariables(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID string) ([]VariableRef, error) {
	vars, err := listVariables(ctx, q, organizationID, workspaceID)
	if err != nil {
		return nil, err
	}
	refs := make([]VariableRef, 0, len(vars))
	for _, v := range vars {
		refs = append(refs, VariableRef{ID: v.ID, Key: v.Key, Sensitive: v.Sensitive, HCL: v.HCL,
			ValueVersion: v.ValueVersion, ValueDigest: hex.EncodeToString(v.ValueDigest)})
	}
	return refs, nil
}

// ResolvedVariable is a pinned variable with its value, for the runner only.
type ResolvedVariable struct {
	Key       string
	Value     string
	Sensitive bool
	HCL       bool
}

// ResolveSnapshot reads the values a snapshot pinned, unsealing sensitive
// ones. Any variable whose value version moved on, or that is gone, fails
// the whole resolution: a run never plans with inputs it did not pin.
func (s *Service) ResolveSnapshot(ctx context.Context, organizationID, workspaceID string, refs []VariableRef) ([]ResolvedVariable, error) {
	var rows []struct {
		ID           string  `db:"id"`
		Value        *string `db:"value"`
		Sealed       []byte  `db:"sealed_value"`
		ValueVersion int     `db:"value_version"`
	}
	if err := s.db.SelectContext(ctx, &rows, `
		SELECT id, value, sealed_value, value_version FROM workspace_variables
		WHERE organization_id = $1 AND workspace_id = $2`, organizationID, workspaceID); err != nil {
		return nil, fmt.Errorf("reading pinned variables: %w", err)
	}
	byID := make(map[string]int, len(rows))
	for i, r := range rows {
		byID[r.ID] = i
	}
	out := make([]ResolvedVariable, 0, len(refs))
	for _, ref := range refs {
		i, ok := byID[ref.ID]
		if !ok || rows[i].ValueVersion != ref.ValueVersion {
			return nil, ErrSnapshotChanged
		}
		value := ""
		switch {
		case ref.Sensitive && rows[i].Sealed != nil:
			if s.sealer == nil {
				return nil, fmt.Errorf("unsealing a sensitive value without CAIRN_MASTER_KEY: %w", fault.ErrUnavailable)
			}
			plain, err := s.sealer.Open(rows[i].Sealed, sealedAssociation(ref.ID, ref.ValueVersion))
			if errors.Is(err, seal.ErrNoKey) {
				return nil, fmt.Errorf("unsealing a sensitive value: %w", fault.ErrUnavailable)
			}
			if err != nil {
				return nil, fmt.Errorf("unsealing variable %s: %w", ref.Key, err)
			}
			value = string(plain)
		case !ref.Sensitive && rows[i].Value != nil:
			value = *rows[i].Value
		default:
			return nil, ErrSnapshotChanged
		}
		out = append(out, ResolvedVariable{Key: ref.Key, Value: value, Sensitive: ref.Sensitive, HCL: ref.HCL})
	}
	return out, nil
}

// WorkspaceByID loads a workspace of an organization without a principal,
// for the runner, which acts on a run's behalf after the run was authorized.
func WorkspaceByID(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID string, forUpdate bool) (Workspace, error) {
	return workspaceByID(ctx, q, organizationID, workspaceID, forUpdate)
}

// ReleaseRunLock releases the workspace lock if the run holds it, for a run
// that ended without its CLI unlocking (a lost worker, a recovery).
func ReleaseRunLock(ctx context.Context, tx *sqlx.Tx, organizationID, workspaceID, runID string) error {
	_, err := tx.ExecContext(ctx, `
		UPDATE workspaces SET locked_by_kind = NULL, locked_by_id = NULL, lock_reason = '', locked_at = NULL, updated_at = now()
		WHERE organization_id = $1 AND id = $2 AND locked_by_kind = 'run' AND locked_by_id = $3`,
		organizationID, workspaceID, runID)
	if err != nil {
		return fmt.Errorf("releasing run lock: %w", err)
	}
	return nil
}
