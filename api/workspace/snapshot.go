package workspace

import (
	"context"
	"crypto/hmac"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/seal"
)

// ErrSnapshotChanged means a value a run pinned cannot be read back as it
// was pinned, so the run cannot see the inputs it was created with.
var ErrSnapshotChanged = errors.New("pinned variable value unavailable")

// Variable categories: input variables written to the run's tfvars file,
// and environment variables of the run's tofu commands.
const (
	CategoryTerraform = "terraform"
	CategoryEnv       = "env"
)

// Where a pinned variable came from.
const (
	SourceWorkspace   = "workspace"
	SourceVariableSet = "variable_set"
)

// VariableRef is a variable as a run's input snapshot records it: identity,
// value version and keyed digest, never the value itself. Snapshots written
// before variable sets have no category (terraform) and no source
// (workspace).
type VariableRef struct {
	ID           string `json:"id"`
	Key          string `json:"key"`
	Category     string `json:"category,omitempty"`
	Sensitive    bool   `json:"sensitive"`
	HCL          bool   `json:"hcl"`
	ValueVersion int    `json:"value_version"`
	ValueDigest  string `json:"value_digest"`
	Source       string `json:"source,omitempty"`
	SetID        string `json:"set_id,omitempty"`
	SetName      string `json:"set_name,omitempty"`
	// Scope is how a set reached the workspace: global, project or
	// workspace.
	Scope    string `json:"scope,omitempty"`
	Priority bool   `json:"priority,omitempty"`
}

// PinnableVariable is a variable a new run may pin: a workspace variable
// or a variable of a set that applies to the workspace, with its stored
// value, plain or sealed.
type PinnableVariable struct {
	ID           string  `db:"id"`
	Key          string  `db:"key"`
	Category     string  `db:"category"`
	Sensitive    bool    `db:"sensitive"`
	HCL          bool    `db:"hcl"`
	Value        *string `db:"value"`
	Sealed       []byte  `db:"sealed_value"`
	ValueVersion int     `db:"value_version"`
	ValueDigest  []byte  `db:"value_digest"`
	Source       string  `db:"source"`
	SetID        string  `db:"set_id"`
	SetName      string  `db:"set_name"`
	Scope        string  `db:"scope"`
	Priority     bool    `db:"priority"`
}

// association is what the stored sealed value is bound to.
func (v PinnableVariable) association() []byte {
	if v.Source == SourceVariableSet {
		return SetVariableAssociation(v.ID, v.ValueVersion)
	}
	return sealedAssociation(v.ID, v.ValueVersion)
}

// SetVariableAssociation binds a variable set variable's sealed value to
// the variable and its value version.
func SetVariableAssociation(variableID string, version int) []byte {
	return fmt.Appendf(nil, "cairn/varset-variable/%s/%d", variableID, version)
}

// VariableSnapshot is the variables a new run pins, values still as stored
// (sensitive ones sealed).
type VariableSnapshot struct{ vars []PinnableVariable }

// NewVariableSnapshot is the snapshot of exactly vars, in their order: the
// caller (variable-set resolution) has chosen one per category and key.
func NewVariableSnapshot(vars []PinnableVariable) VariableSnapshot {
	return VariableSnapshot{vars: vars}
}

// WorkspaceVariables reads the workspace's own variables as pinnable
// variables, ordered by key.
func WorkspaceVariables(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID string) ([]PinnableVariable, error) {
	var vars []PinnableVariable
	if err := sqlx.SelectContext(ctx, q, &vars, `SELECT id, key, category, sensitive, hcl, value, sealed_value,
		value_version, value_digest, 'workspace' AS source, '' AS set_id, '' AS set_name, '' AS scope, false AS priority
		FROM workspace_variables WHERE organization_id = $1 AND workspace_id = $2 ORDER BY key, category`, organizationID, workspaceID); err != nil {
		return nil, fmt.Errorf("reading variables to pin: %w", err)
	}
	return vars, nil
}

// WithoutSensitive is the snapshot less its sensitive variables: what a
// run pins when it must not get them, not as a value and not as a
// reference.
func (v VariableSnapshot) WithoutSensitive() VariableSnapshot {
	kept := make([]PinnableVariable, 0, len(v.vars))
	for _, x := range v.vars {
		if !x.Sensitive {
			kept = append(kept, x)
		}
	}
	return VariableSnapshot{vars: kept}
}

// Refs are the snapshot's references: identity, value version and keyed
// digest of each variable, and where it came from.
func (v VariableSnapshot) Refs() []VariableRef {
	refs := make([]VariableRef, 0, len(v.vars))
	for _, x := range v.vars {
		refs = append(refs, VariableRef{ID: x.ID, Key: x.Key, Category: x.Category, Sensitive: x.Sensitive, HCL: x.HCL,
			ValueVersion: x.ValueVersion, ValueDigest: hex.EncodeToString(x.ValueDigest), Source: x.Source,
			SetID: x.SetID, SetName: x.SetName, Scope: x.Scope, Priority: x.Priority})
	}
	return refs
}

// PinValues copies every value of the snapshot for the run, in the caller's
// transaction (the one that creates the run), so later edits and deletions
// of the variables never reach it. Sensitive values are sealed again bound
// to the run and the variable, never stored in clear; without
// CAIRN_MASTER_KEY they cannot be pinned and the run is refused (503).
func (s *Service) PinValues(ctx context.Context, tx *sqlx.Tx, organizationID, runID string, snap VariableSnapshot) error {
	if len(snap.vars) == 0 {
		return nil
	}
	// One COPY for every value: a run of a workspace with twenty sets of a
	// hundred variables pins two thousand rows, and a round trip per row
	// made run creation grow with them.
	copyIn, err := tx.PrepareContext(ctx, pq.CopyIn("run_variable_values", "run_id", "organization_id", "variable_id",
		"value_version", "value", "sealed_value"))
	if err != nil {
		return fmt.Errorf("pinning variables: %w", err)
	}
	defer copyIn.Close()
	for _, v := range snap.vars {
		// Exactly one of the two is NULL: COPY would store a nil slice as
		// an empty bytea, not as NULL.
		var plain, sealed any
		if v.Sensitive {
			value, err := s.openSealed(v.Sealed, v.association(), v.Key)
			if err != nil {
				return err
			}
			if sealed, err = s.sealer.Seal(value, pinnedAssociation(runID, v.ID, v.ValueVersion)); err != nil {
				return fmt.Errorf("sealing the pinned value of %s: %w", v.Key, err)
			}
		} else if v.Value != nil {
			plain = *v.Value
		}
		if _, err := copyIn.ExecContext(ctx, runID, organizationID, v.ID, v.ValueVersion, plain, sealed); err != nil {
			return fmt.Errorf("pinning variable %s: %w", v.Key, err)
		}
	}
	if _, err := copyIn.ExecContext(ctx); err != nil {
		return fmt.Errorf("pinning variables: %w", err)
	}
	return nil
}

// pinnedAssociation binds a pinned copy to its run, variable and value
// version: a copy moved onto another run or variable does not open.
func pinnedAssociation(runID, variableID string, version int) []byte {
	return fmt.Appendf(nil, "cairn/run-variable/%s/%s/%d", runID, variableID, version)
}

func (s *Service) openSealed(sealed, associated []byte, key string) ([]byte, error) {
	plain, err := s.sealer.Open(sealed, associated)
	if errors.Is(err, seal.ErrNoKey) {
		return nil, fmt.Errorf("unsealing a sensitive value without CAIRN_MASTER_KEY: %w", fault.ErrUnavailable)
	}
	if err != nil {
		return nil, fmt.Errorf("unsealing variable %s: %w", key, err)
	}
	return plain, nil
}

// ResolvedVariable is a pinned variable with its value, for the runner only.
type ResolvedVariable struct {
	Key string
	// Category is terraform (the tfvars file) or env (the environment).
	Category  string
	Value     string
	Sensitive bool
	HCL       bool
	// Priority is a priority set's value: no run variable replaces it.
	Priority bool
}

// ResolvePinned reads the values a run pinned at creation, unsealing
// sensitive ones, whatever happened to the variables since. Each value must
// still match the keyed digest the snapshot recorded, so a copy that was
// altered or swapped fails the whole resolution: a run never plans or
// applies with inputs it did not pin.
func (s *Service) ResolvePinned(ctx context.Context, organizationID, workspaceID, runID string, refs []VariableRef) ([]ResolvedVariable, error) {
	var rows []storedValue
	if err := s.db.SelectContext(ctx, &rows, `SELECT variable_id AS id, value, sealed_value, value_version
		FROM run_variable_values WHERE organization_id = $1 AND run_id = $2`, organizationID, runID); err != nil {
		return nil, fmt.Errorf("reading pinned values: %w", err)
	}
	association := func(ref VariableRef) []byte { return pinnedAssociation(runID, ref.ID, ref.ValueVersion) }
	if len(rows) == 0 && len(refs) > 0 {
		// A run created before values were pinned by copy reads the
		// workspace's variables, which must still hold the pinned versions.
		if err := s.db.SelectContext(ctx, &rows, `SELECT id, value, sealed_value, value_version FROM workspace_variables
			WHERE organization_id = $1 AND workspace_id = $2`, organizationID, workspaceID); err != nil {
			return nil, fmt.Errorf("reading pinned variables: %w", err)
		}
		association = func(ref VariableRef) []byte { return sealedAssociation(ref.ID, ref.ValueVersion) }
	}
	byID := make(map[string]storedValue, len(rows))
	for _, r := range rows {
		byID[r.ID] = r
	}
	out := make([]ResolvedVariable, 0, len(refs))
	for _, ref := range refs {
		row, ok := byID[ref.ID]
		if !ok || row.ValueVersion != ref.ValueVersion {
			return nil, ErrSnapshotChanged
		}
		var value string
		switch {
		case ref.Sensitive && row.Sealed != nil:
			plain, err := s.openSealed(row.Sealed, association(ref), ref.Key)
			if err != nil {
				return nil, err
			}
			value = string(plain)
		case !ref.Sensitive && row.Value != nil:
			value = *row.Value
		default:
			return nil, ErrSnapshotChanged
		}
		if want, err := hex.DecodeString(ref.ValueDigest); err != nil || !hmac.Equal(s.digest(value), want) {
			return nil, ErrSnapshotChanged
		}
		category := ref.Category
		if category == "" {
			category = CategoryTerraform
		}
		out = append(out, ResolvedVariable{Key: ref.Key, Category: category, Value: value, Sensitive: ref.Sensitive,
			HCL: ref.HCL, Priority: ref.Priority})
	}
	return out, nil
}

// storedValue is a stored variable value, plain or sealed.
type storedValue struct {
	ID           string  `db:"id"`
	Value        *string `db:"value"`
	Sealed       []byte  `db:"sealed_value"`
	ValueVersion int     `db:"value_version"`
}

// DropPinnedValues deletes a run's copies of its variable values, in the
// caller's transaction, once the run can no longer execute a phase: sealed
// secrets are kept only as long as they may be used. The snapshot's
// references and digests stay as evidence.
func DropPinnedValues(ctx context.Context, tx *sqlx.Tx, runID string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM run_variable_values WHERE run_id = $1`, runID); err != nil {
		return fmt.Errorf("dropping pinned values: %w", err)
	}
	return nil
}

// WorkspaceByID loads a workspace of an organization without a principal,
// for the runner, which acts on a run's behalf after the run was authorized.
func WorkspaceByID(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID string, forUpdate bool) (Workspace, error) {
	return workspaceByID(ctx, q, organizationID, workspaceID, forUpdate)
}

// LockForRun takes the workspace lock for a run when nobody holds it and
// reports whether the run holds it afterwards.
func LockForRun(ctx context.Context, tx *sqlx.Tx, organizationID, workspaceID, runID string, now time.Time) (bool, error) {
	var held bool
	err := tx.GetContext(ctx, &held, `
		WITH taken AS (
			UPDATE workspaces SET locked_by_kind = 'run', locked_by_id = $3, lock_reason = 'Locked by its run', locked_at = $4, updated_at = $4
			WHERE organization_id = $1 AND id = $2 AND locked_by_id IS NULL
			RETURNING 1)
		SELECT EXISTS (SELECT 1 FROM taken) OR EXISTS (SELECT 1 FROM workspaces
			WHERE organization_id = $1 AND id = $2 AND locked_by_kind = 'run' AND locked_by_id = $3)`,
		organizationID, workspaceID, runID, now)
	if err != nil {
		return false, fmt.Errorf("locking workspace for run: %w", err)
	}
	return held, nil
}

// ReleaseRunLock releases the workspace lock if the run holds it: a run's
// lock (its own or its CLI's) ends with the run.
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
