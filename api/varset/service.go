package varset

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/platform/cursor"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/platform/seal"
	"github.com/cairnhq/cairn/api/workspace"
)

// Service is an organization's variable sets. Mutations take the caller's
// transaction so that idempotency records and audit evidence commit with
// them.
type Service struct {
	db        *sqlx.DB
	sealer    *seal.Sealer
	digestKey []byte
	now       func() time.Time
}

// NewService returns the variable-set service. sealer and digestKey must
// be the workspace service's: a pinned set value is checked and unsealed by
// the same code as a workspace variable. sealer may be nil (no master key):
// sensitive variables then fail closed.
func NewService(conn *sqlx.DB, sealer *seal.Sealer, digestKey []byte) *Service {
	return &Service{db: conn, sealer: sealer, digestKey: digestKey, now: time.Now}
}

func (s *Service) stamp() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// require checks an organization-wide variable-set permission. A token
// bounded to a project or workspace never manages or reads the
// organization's sets: they reach beyond its boundary.
func require(p access.Principal, perm access.Permission) error {
	if err := p.Require(perm); err != nil {
		return err
	}
	if p.ProjectID != "" || p.WorkspaceID != "" {
		return fmt.Errorf("%w: a token bounded to a project or workspace cannot use variable sets", fault.ErrForbidden)
	}
	return nil
}

// setForWrite loads and locks a set the principal may change.
func (s *Service) setForWrite(ctx context.Context, tx *sqlx.Tx, p access.Principal, setID string) (Set, error) {
	if err := require(p, access.PermVarsetWrite); err != nil {
		return Set{}, err
	}
	return setByID(ctx, tx, p.OrganizationID, setID, true)
}

// Create creates a set in the principal's organization.
func (s *Service) Create(ctx context.Context, tx *sqlx.Tx, p access.Principal, in SetInput) (Set, error) {
	if err := require(p, access.PermVarsetWrite); err != nil {
		return Set{}, err
	}
	if in.Name == nil {
		return Set{}, fmt.Errorf("%w: name is required", ErrInvalid)
	}
	now := s.stamp()
	set := Set{ID: id.New("varset"), OrganizationID: p.OrganizationID, ProjectIDs: []string{}, WorkspaceIDs: []string{},
		CreatedAt: now, UpdatedAt: now}
	if err := applySetInput(&set, in); err != nil {
		return Set{}, err
	}
	if err := insertSet(ctx, tx, set); err != nil {
		return Set{}, err
	}
	return set, audit.Record(ctx, tx, p, "variable_set.created", "variable_set", set.ID, map[string]any{
		"name": set.Name, "global": set.Global, "priority": set.Priority,
	})
}

// applySetInput validates in and writes it into set.
func applySetInput(set *Set, in SetInput) error {
	if in.Name != nil {
		name, err := validateName(*in.Name)
		if err != nil {
			return err
		}
		set.Name = name
	}
	if in.Description != nil {
		d, err := validateDescription(*in.Description)
		if err != nil {
			return err
		}
		set.Description = d
	}
	if in.Global != nil {
		set.Global = *in.Global
	}
	if in.Priority != nil {
		set.Priority = *in.Priority
	}
	return nil
}

// Update changes a set's name, description, global and priority flags.
// Making a set global clears its project and workspace lists, as HCP
// Terraform does.
func (s *Service) Update(ctx context.Context, tx *sqlx.Tx, p access.Principal, setID string, in SetInput) (Set, error) {
	set, err := s.setForWrite(ctx, tx, p, setID)
	if err != nil {
		return Set{}, err
	}
	before := set
	if err := applySetInput(&set, in); err != nil {
		return Set{}, err
	}
	set.UpdatedAt = s.stamp()
	if err := updateSet(ctx, tx, set); err != nil {
		return Set{}, err
	}
	if set.Global && (len(set.ProjectIDs) > 0 || len(set.WorkspaceIDs) > 0) {
		if err := clearScope(ctx, tx, set.ID); err != nil {
			return Set{}, err
		}
		set.ProjectIDs, set.WorkspaceIDs = []string{}, []string{}
	}
	return set, audit.Record(ctx, tx, p, "variable_set.updated", "variable_set", set.ID, map[string]any{
		"name": set.Name, "renamed_from": renamedFrom(before, set), "global": set.Global, "priority": set.Priority,
		"was_global": before.Global, "was_priority": before.Priority,
	})
}

func renamedFrom(before, after Set) any {
	if before.Name == after.Name {
		return nil
	}
	return before.Name
}

// Delete removes a set with its variables and scope.
func (s *Service) Delete(ctx context.Context, tx *sqlx.Tx, p access.Principal, setID string) (Set, error) {
	set, err := s.setForWrite(ctx, tx, p, setID)
	if err != nil {
		return Set{}, err
	}
	if err := deleteSet(ctx, tx, p.OrganizationID, set.ID); err != nil {
		return Set{}, err
	}
	return set, audit.Record(ctx, tx, p, "variable_set.deleted", "variable_set", set.ID, map[string]any{
		"name": set.Name, "variable_count": set.VariableCount,
	})
}

// Get reads one set with its scope.
func (s *Service) Get(ctx context.Context, p access.Principal, setID string) (Set, error) {
	if err := require(p, access.PermVarsetRead); err != nil {
		return Set{}, err
	}
	return setByID(ctx, s.db, p.OrganizationID, setID, false)
}

// List reads a page of the organization's sets in byte order of name and
// the cursor of the next page ("" after the last).
func (s *Service) List(ctx context.Context, p access.Principal, q ListQuery) ([]Set, string, error) {
	if err := require(p, access.PermVarsetRead); err != nil {
		return nil, "", err
	}
	limit := q.Limit
	if limit < cursor.MinLimit || limit > cursor.MaxLimit {
		limit = cursor.DefaultLimit
	}
	after := ""
	if q.Cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(q.Cursor)
		if err != nil || len(raw) == 0 || len(q.Cursor) > cursor.MaxLength {
			return nil, "", ErrInvalidCursor
		}
		after = string(raw)
	}
	sets, err := listSets(ctx, s.db, p.OrganizationID, q.Query, after, limit+1)
	if err != nil {
		return nil, "", err
	}
	if len(sets) <= limit {
		return sets, "", nil
	}
	sets = sets[:limit]
	return sets, base64.RawURLEncoding.EncodeToString([]byte(sets[limit-1].Name)), nil
}

// ListPage reads one numbered page (from 1) of the organization's sets in
// name order and their total, for /api/v2's page[number].
func (s *Service) ListPage(ctx context.Context, p access.Principal, q ListQuery, page, size int) ([]Set, int, error) {
	if err := require(p, access.PermVarsetRead); err != nil {
		return nil, 0, err
	}
	if page < 1 || size < 1 {
		return nil, 0, fmt.Errorf("%w: page and size start at 1", ErrInvalid)
	}
	return pageSets(ctx, s.db, p.OrganizationID, q.Query, (page-1)*size, size)
}

// ForWorkspace reads the sets that apply to a workspace (global ones, its
// project's and its own), for whoever may read its variables.
func (s *Service) ForWorkspace(ctx context.Context, p access.Principal, workspaceID string) ([]Set, error) {
	w, err := readableWorkspace(ctx, s.db, p, workspaceID, access.PermVariableRead)
	if err != nil {
		return nil, err
	}
	return setsApplying(ctx, s.db, p.OrganizationID, w.ID, w.ProjectID)
}

// ForProject reads the sets that apply to a project's workspaces.
func (s *Service) ForProject(ctx context.Context, p access.Principal, projectID string) ([]Set, error) {
	if err := require(p, access.PermVarsetRead); err != nil {
		return nil, err
	}
	if _, err := readableProjects(ctx, s.db, p, []string{projectID}); err != nil {
		return nil, err
	}
	return setsApplying(ctx, s.db, p.OrganizationID, "", projectID)
}

// readableWorkspace loads a workspace the principal holds perm in; one it
// cannot read (or of another organization) is not found.
func readableWorkspace(ctx context.Context, q sqlx.QueryerContext, p access.Principal, workspaceID string, perm access.Permission) (scopeTarget, error) {
	found, err := workspacesByID(ctx, q, p.OrganizationID, []string{workspaceID})
	if err != nil {
		return scopeTarget{}, err
	}
	if len(found) == 0 {
		return scopeTarget{}, fault.ErrNotFound
	}
	return found[0], p.RequireIn(found[0].ID, found[0].ProjectID, perm)
}

// readableWorkspaces checks that every ID is a workspace the principal
// can read: any other is not found, exactly like a missing one.
func readableWorkspaces(ctx context.Context, q sqlx.QueryerContext, p access.Principal, ids []string) ([]string, error) {
	found, err := workspacesByID(ctx, q, p.OrganizationID, ids)
	if err != nil {
		return nil, err
	}
	return readable(ids, found, func(t scopeTarget) bool { return p.CanReadWorkspace(t.ID, t.ProjectID) })
}

// readableProjects checks that every ID is a project the principal can
// read.
func readableProjects(ctx context.Context, q sqlx.QueryerContext, p access.Principal, ids []string) ([]string, error) {
	found, err := projectsByID(ctx, q, p.OrganizationID, ids)
	if err != nil {
		return nil, err
	}
	return readable(ids, found, func(t scopeTarget) bool {
		return p.PermissionsOnProject(t.ID).Has(access.PermProjectRead) && (p.ProjectID == "" || p.ProjectID == t.ID)
	})
}

// readable returns ids sorted and deduplicated when every one was found
// and passes can; else fault.ErrNotFound.
func readable(ids []string, found []scopeTarget, can func(scopeTarget) bool) ([]string, error) {
	ok := make(map[string]bool, len(found))
	for _, t := range found {
		ok[t.ID] = can(t)
	}
	out := slices.Clone(ids)
	slices.Sort(out)
	out = slices.Compact(out)
	for _, x := range out {
		if !ok[x] {
			return nil, fault.ErrNotFound
		}
	}
	return out, nil
}

// scopeChange is one change of a set's scope, for its audit evidence.
type scopeChange struct {
	addWorkspaces, removeWorkspaces, addProjects, removeProjects []string
}

// changeScope applies a scope change to a locked set and records it.
func (s *Service) changeScope(ctx context.Context, tx *sqlx.Tx, p access.Principal, set Set, c scopeChange) (Set, error) {
	var err error
	if c.addWorkspaces, err = readableWorkspaces(ctx, tx, p, c.addWorkspaces); err != nil {
		return Set{}, err
	}
	if c.removeWorkspaces, err = readableWorkspaces(ctx, tx, p, c.removeWorkspaces); err != nil {
		return Set{}, err
	}
	if c.addProjects, err = readableProjects(ctx, tx, p, c.addProjects); err != nil {
		return Set{}, err
	}
	if c.removeProjects, err = readableProjects(ctx, tx, p, c.removeProjects); err != nil {
		return Set{}, err
	}
	for _, step := range []struct {
		t   scopeTable
		ids []string
		add bool
	}{{workspaceScope, c.addWorkspaces, true}, {workspaceScope, c.removeWorkspaces, false},
		{projectScope, c.addProjects, true}, {projectScope, c.removeProjects, false}} {
		if len(step.ids) == 0 {
			continue
		}
		if step.add {
			err = addScope(ctx, tx, step.t, set.OrganizationID, set.ID, step.ids)
		} else {
			err = removeScope(ctx, tx, step.t, set.ID, step.ids)
		}
		if err != nil {
			return Set{}, err
		}
	}
	set.UpdatedAt = s.stamp()
	if err := touchSet(ctx, tx, set.ID, set); err != nil {
		return Set{}, err
	}
	after, err := setByID(ctx, tx, set.OrganizationID, set.ID, false)
	if err != nil {
		return Set{}, err
	}
	return after, audit.Record(ctx, tx, p, "variable_set.scope_changed", "variable_set", set.ID, map[string]any{
		"global": after.Global, "was_global": set.Global,
		"workspaces_added": nonNil(c.addWorkspaces), "workspaces_removed": nonNil(c.removeWorkspaces),
		"projects_added": nonNil(c.addProjects), "projects_removed": nonNil(c.removeProjects),
	})
}

func nonNil(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return ids
}

// AddWorkspaces applies a set to workspaces the principal can read.
func (s *Service) AddWorkspaces(ctx context.Context, tx *sqlx.Tx, p access.Principal, setID string, ids []string) (Set, error) {
	set, err := s.setForWrite(ctx, tx, p, setID)
	if err != nil {
		return Set{}, err
	}
	return s.changeScope(ctx, tx, p, set, scopeChange{addWorkspaces: ids})
}

// RemoveWorkspaces stops applying a set to workspaces.
func (s *Service) RemoveWorkspaces(ctx context.Context, tx *sqlx.Tx, p access.Principal, setID string, ids []string) (Set, error) {
	set, err := s.setForWrite(ctx, tx, p, setID)
	if err != nil {
		return Set{}, err
	}
	return s.changeScope(ctx, tx, p, set, scopeChange{removeWorkspaces: ids})
}

// AddProjects applies a set to the workspaces of projects the principal
// can read.
func (s *Service) AddProjects(ctx context.Context, tx *sqlx.Tx, p access.Principal, setID string, ids []string) (Set, error) {
	set, err := s.setForWrite(ctx, tx, p, setID)
	if err != nil {
		return Set{}, err
	}
	return s.changeScope(ctx, tx, p, set, scopeChange{addProjects: ids})
}

// RemoveProjects stops applying a set to projects.
func (s *Service) RemoveProjects(ctx context.Context, tx *sqlx.Tx, p access.Principal, setID string, ids []string) (Set, error) {
	set, err := s.setForWrite(ctx, tx, p, setID)
	if err != nil {
		return Set{}, err
	}
	return s.changeScope(ctx, tx, p, set, scopeChange{removeProjects: ids})
}

// ReplaceScope sets a set's whole scope: global (the lists are then
// cleared), or exactly the workspaces and projects given.
func (s *Service) ReplaceScope(ctx context.Context, tx *sqlx.Tx, p access.Principal, setID string, global bool, workspaceIDs, projectIDs []string) (Set, error) {
	set, err := s.setForWrite(ctx, tx, p, setID)
	if err != nil {
		return Set{}, err
	}
	if global && (len(workspaceIDs) > 0 || len(projectIDs) > 0) {
		return Set{}, fmt.Errorf("%w: a global set lists no workspaces or projects", ErrInvalid)
	}
	if set.Global != global {
		updated := set
		updated.Global, updated.UpdatedAt = global, s.stamp()
		if err := updateSet(ctx, tx, updated); err != nil {
			return Set{}, err
		}
	}
	wanted := func(ids []string) []string {
		out := slices.Clone(ids)
		slices.Sort(out)
		return slices.Compact(out)
	}
	ws, prj := wanted(workspaceIDs), wanted(projectIDs)
	c := scopeChange{
		addWorkspaces: missingFrom(ws, set.WorkspaceIDs), removeWorkspaces: missingFrom(set.WorkspaceIDs, ws),
		addProjects: missingFrom(prj, set.ProjectIDs), removeProjects: missingFrom(set.ProjectIDs, prj),
	}
	return s.changeScope(ctx, tx, p, set, c)
}

// missingFrom is the IDs of a not in b.
func missingFrom(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// sealValue puts a new value into v (plain or sealed) and returns the
// ciphertext of a sensitive one.
func (s *Service) sealValue(v *Variable, value string) ([]byte, error) {
	var sealed []byte
	var err error
	v.Value, sealed, v.ValueDigest, err = workspace.StoreValue(s.sealer, s.digestKey, value, v.Sensitive,
		workspace.SetVariableAssociation(v.ID, v.ValueVersion))
	return sealed, err
}

// CreateVariable adds a variable to a set.
func (s *Service) CreateVariable(ctx context.Context, tx *sqlx.Tx, p access.Principal, setID string, in VariableInput) (Variable, error) {
	set, err := s.setForWrite(ctx, tx, p, setID)
	if err != nil {
		return Variable{}, err
	}
	if in.Category == "" {
		in.Category = workspace.CategoryTerraform
	}
	if err := validateVariable(in.Key, in.Category, in.HCL); err != nil {
		return Variable{}, err
	}
	if in.Value == nil {
		return Variable{}, fmt.Errorf("%w: value is required", ErrInvalid)
	}
	if err := workspace.ValidateValue(*in.Value, in.HCL); err != nil {
		return Variable{}, err
	}
	desc, err := validateDescription(in.Description)
	if err != nil {
		return Variable{}, err
	}
	now := s.stamp()
	v := Variable{ID: id.New("vsv"), SetID: set.ID, OrganizationID: set.OrganizationID, Key: in.Key, Category: in.Category,
		Description: desc, HCL: in.HCL, Sensitive: in.Sensitive, ValueVersion: 1, CreatedAt: now, UpdatedAt: now}
	sealed, err := s.sealValue(&v, *in.Value)
	if err != nil {
		return Variable{}, err
	}
	if err := insertVariable(ctx, tx, v, sealed); err != nil {
		return Variable{}, err
	}
	set.UpdatedAt = now
	if err := touchSet(ctx, tx, set.ID, set); err != nil {
		return Variable{}, err
	}
	v.VersionID = versionID(v)
	return v, audit.Record(ctx, tx, p, "variable_set_variable.created", "variable_set_variable", v.ID, map[string]any{
		"variable_set_id": set.ID, "key": v.Key, "category": v.Category, "sensitive": v.Sensitive, "hcl": v.HCL,
		"value_version": v.ValueVersion,
	})
}

// UpdateVariable replaces a set variable's settings. An empty key or
// category keeps the current one. Without a value the stored value, its
// version and digest stay, which is only possible while sensitivity stays
// the same; with a value the version advances.
func (s *Service) UpdateVariable(ctx context.Context, tx *sqlx.Tx, p access.Principal, setID, variableID string, in VariableInput) (Variable, error) {
	set, err := s.setForWrite(ctx, tx, p, setID)
	if err != nil {
		return Variable{}, err
	}
	v, err := variableByID(ctx, tx, set.OrganizationID, set.ID, variableID, true)
	if err != nil {
		return Variable{}, err
	}
	if in.Key == "" {
		in.Key = v.Key
	}
	if in.Category == "" {
		in.Category = v.Category
	}
	if err := validateVariable(in.Key, in.Category, in.HCL); err != nil {
		return Variable{}, err
	}
	desc, err := validateDescription(in.Description)
	if err != nil {
		return Variable{}, err
	}
	if in.Value == nil && in.Sensitive != v.Sensitive {
		return Variable{}, ErrValueRequired
	}
	if in.Value == nil && in.HCL && !v.HCL && !v.Sensitive && v.Value != nil {
		// Turning on HCL for a kept plain value must still parse.
		if err := workspace.ValidateValue(*v.Value, true); err != nil {
			return Variable{}, err
		}
	}
	if in.Value == nil && in.HCL && !v.HCL && v.Sensitive {
		return Variable{}, fmt.Errorf("%w: turning on HCL for a sensitive value needs the value", ErrValueRequired)
	}
	v.Key, v.Category, v.HCL, v.Description, v.Sensitive, v.UpdatedAt = in.Key, in.Category, in.HCL, desc, in.Sensitive, s.stamp()
	var sealed []byte
	if in.Value != nil {
		if err := workspace.ValidateValue(*in.Value, in.HCL); err != nil {
			return Variable{}, err
		}
		v.ValueVersion++
		if sealed, err = s.sealValue(&v, *in.Value); err != nil {
			return Variable{}, err
		}
	}
	if err := updateVariable(ctx, tx, v, sealed, in.Value != nil); err != nil {
		return Variable{}, err
	}
	set.UpdatedAt = v.UpdatedAt
	if err := touchSet(ctx, tx, set.ID, set); err != nil {
		return Variable{}, err
	}
	if v.Sensitive {
		v.Value = nil
	}
	v.VersionID = versionID(v)
	return v, audit.Record(ctx, tx, p, "variable_set_variable.updated", "variable_set_variable", v.ID, map[string]any{
		"variable_set_id": set.ID, "key": v.Key, "category": v.Category, "sensitive": v.Sensitive, "hcl": v.HCL,
		"value_version": v.ValueVersion, "value_changed": in.Value != nil,
	})
}

// DeleteVariable removes a set variable.
func (s *Service) DeleteVariable(ctx context.Context, tx *sqlx.Tx, p access.Principal, setID, variableID string) error {
	set, err := s.setForWrite(ctx, tx, p, setID)
	if err != nil {
		return err
	}
	v, err := variableByID(ctx, tx, set.OrganizationID, set.ID, variableID, true)
	if err != nil {
		return err
	}
	if err := deleteVariable(ctx, tx, set.OrganizationID, v.ID); err != nil {
		return err
	}
	set.UpdatedAt = s.stamp()
	if err := touchSet(ctx, tx, set.ID, set); err != nil {
		return err
	}
	return audit.Record(ctx, tx, p, "variable_set_variable.deleted", "variable_set_variable", v.ID, map[string]any{
		"variable_set_id": set.ID, "key": v.Key, "category": v.Category,
	})
}

// Variable reads one variable of a set (a sensitive one without value).
func (s *Service) Variable(ctx context.Context, p access.Principal, setID, variableID string) (Variable, error) {
	if err := require(p, access.PermVarsetRead); err != nil {
		return Variable{}, err
	}
	v, err := variableByID(ctx, s.db, p.OrganizationID, setID, variableID, false)
	if err != nil {
		return Variable{}, err
	}
	return readable1(v), nil
}

// Variables reads a set's variables by category and key (sensitive ones
// without value).
func (s *Service) Variables(ctx context.Context, p access.Principal, setID string) ([]Variable, error) {
	if err := require(p, access.PermVarsetRead); err != nil {
		return nil, err
	}
	if _, err := setByID(ctx, s.db, p.OrganizationID, setID, false); err != nil {
		return nil, err
	}
	vars, err := listVariables(ctx, s.db, p.OrganizationID, setID)
	for i := range vars {
		vars[i] = readable1(vars[i])
	}
	return vars, err
}

// readable1 is a variable as reads return it: never a sensitive value.
func readable1(v Variable) Variable {
	if v.Sensitive {
		v.Value = nil
	}
	v.VersionID = versionID(v)
	return v
}

// Effective is what a new run of the workspace would get: every candidate
// value, ordered by category, key and precedence, with the winner of each
// category and key marked. Sensitive values are never included. It needs
// variable:read on the workspace.
func (s *Service) Effective(ctx context.Context, p access.Principal, workspaceID string) ([]Candidate, error) {
	w, err := readableWorkspace(ctx, s.db, p, workspaceID, access.PermVariableRead)
	if err != nil {
		return nil, err
	}
	var name string
	if err := s.db.GetContext(ctx, &name, `SELECT name FROM workspaces WHERE id = $1`, w.ID); err != nil {
		return nil, fmt.Errorf("reading workspace name: %w", err)
	}
	cands, err := candidates(ctx, s.db, p.OrganizationID, w.ID, w.ProjectID)
	if err != nil {
		return nil, err
	}
	resolved := resolve(cands)
	out := make([]Candidate, 0, len(resolved))
	for i, c := range resolved {
		cand := Candidate{ID: c.ID, Key: c.Key, Category: c.Category, Value: c.Value, Sensitive: c.Sensitive, HCL: c.HCL,
			Source: c.Source, SourceID: c.SetID, SourceName: c.SetName, Scope: c.Scope, Priority: c.Priority,
			Wins: wins(resolved, i)}
		if c.Source == workspace.SourceWorkspace {
			cand.SourceID, cand.SourceName, cand.Scope = w.ID, name, ScopeWorkspace
		}
		if c.Sensitive {
			cand.Value = nil
		}
		out = append(out, cand)
	}
	return out, nil
}

// SnapshotForRun is what a new run of the workspace pins: the winner of
// each category and key by the precedence of Tier, read in the run's
// transaction, values still as stored.
func SnapshotForRun(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID, projectID string) (workspace.VariableSnapshot, error) {
	cands, err := candidates(ctx, q, organizationID, workspaceID, projectID)
	if err != nil {
		return workspace.VariableSnapshot{}, err
	}
	return workspace.NewVariableSnapshot(winners(resolve(cands))), nil
}

// Named is a workspace or project of a set's scope, by ID and name.
type Named struct {
	ID   string `db:"id"`
	Name string `db:"name"`
}

// ScopeNames names the workspaces and projects of a set's lists, those the
// principal can read only, each list in name order.
func (s *Service) ScopeNames(ctx context.Context, p access.Principal, set Set) (workspaces, projects []Named, err error) {
	var ws []struct {
		Named
		ProjectID string `db:"project_id"`
	}
	if err := s.db.SelectContext(ctx, &ws, `SELECT id, name, project_id FROM workspaces
		WHERE organization_id = $1 AND id = ANY($2) ORDER BY name`, p.OrganizationID, pq.Array(set.WorkspaceIDs)); err != nil {
		return nil, nil, fmt.Errorf("naming variable set workspaces: %w", err)
	}
	workspaces = []Named{}
	for _, w := range ws {
		if p.CanReadWorkspace(w.ID, w.ProjectID) {
			workspaces = append(workspaces, w.Named)
		}
	}
	var prj []Named
	if err := s.db.SelectContext(ctx, &prj, `SELECT id, name FROM projects
		WHERE organization_id = $1 AND id = ANY($2) ORDER BY name`, p.OrganizationID, pq.Array(set.ProjectIDs)); err != nil {
		return nil, nil, fmt.Errorf("naming variable set projects: %w", err)
	}
	projects = []Named{}
	for _, x := range prj {
		if p.PermissionsOnProject(x.ID).Has(access.PermProjectRead) {
			projects = append(projects, x)
		}
	}
	return workspaces, projects, nil
}
