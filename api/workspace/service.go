package workspace

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/platform/cursor"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/platform/seal"
)

// Service is projects, workspaces, their execution settings and variables.
// Mutations take the caller's transaction so that idempotency records,
// audit evidence and implied jobs commit with them.
type Service struct {
	db           *sqlx.DB
	sealer       *seal.Sealer
	digestKey    []byte
	toolVersions []string
	// runnerOwnsEnv names the environment variables the runner sets
	// itself; until it is known, env variables are refused.
	runnerOwnsEnv func(string) bool
	// listStatement starts every list's query (listStatement); once
	// ReadCurrentRuns is called, it reads current runs (listsCurrentRuns).
	listStatement    string
	listsCurrentRuns bool
	now              func() time.Time
}

// ReserveEnvironmentNames sets which env variable names the runner owns
// (credential.RunnerOwnsEnvironmentName), which no variable may set.
// Without it the service refuses env variables.
func (s *Service) ReserveEnvironmentNames(owned func(string) bool) { s.runnerOwnsEnv = owned }

// ReadCurrentRuns makes lists read each workspace's current run in their
// own query: lateral(w) is a subquery selecting the id and status of the
// current run of the workspace whose ID is the SQL expression w
// (run.CurrentRunLateral). The run package owns what "current" means and
// imports this one, hence the hook. Without it lists leave CurrentRunRead
// false and callers read current runs themselves.
func (s *Service) ReadCurrentRuns(lateral func(workspaceID string) string) {
	s.listStatement, s.listsCurrentRuns = listStatement(lateral), true
}

// NewService returns the workspace service. sealer may be nil (no master
// key): sensitive variables then fail closed.
func NewService(conn *sqlx.DB, sealer *seal.Sealer, digestKey []byte, toolVersions []string) *Service {
	return &Service{db: conn, sealer: sealer, digestKey: digestKey, toolVersions: toolVersions, now: time.Now,
		listStatement: listStatement(nil)}
}

func (s *Service) stamp() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// CreateProject creates a project in the principal's organization.
func (s *Service) CreateProject(ctx context.Context, tx *sqlx.Tx, p access.Principal, name string) (Project, error) {
	return s.CreateDescribedProject(ctx, tx, p, name, "")
}

// CreateDescribedProject creates a project with a description.
func (s *Service) CreateDescribedProject(ctx context.Context, tx *sqlx.Tx, p access.Principal, name, description string) (Project, error) {
	if err := p.Require(access.PermProjectWrite); err != nil {
		return Project{}, err
	}
	name, err := ValidateName(name)
	if err != nil {
		return Project{}, err
	}
	if err := validateProjectDescription(description); err != nil {
		return Project{}, err
	}
	return s.createProject(ctx, tx, p, name, description)
}

func validateProjectDescription(d string) error {
	if len(d) > maxProjectDescription {
		return fmt.Errorf("%w: description is over %d bytes", ErrInvalid, maxProjectDescription)
	}
	return nil
}

func (s *Service) createProject(ctx context.Context, tx *sqlx.Tx, p access.Principal, name, description string) (Project, error) {
	proj := Project{ID: id.New("prj"), OrganizationID: p.OrganizationID, Name: name, Description: description,
		CreatedBy: p.ID, CreatedAt: s.stamp()}
	if err := insertProject(ctx, tx, proj); err != nil {
		return Project{}, err
	}
	return proj, audit.Record(ctx, tx, p, "project.created", "project", proj.ID, map[string]any{"name": proj.Name})
}

// GetProject reads one project.
func (s *Service) GetProject(ctx context.Context, p access.Principal, projectID string) (Project, error) {
	if err := p.Require(access.PermProjectRead); err != nil {
		return Project{}, err
	}
	return projectByID(ctx, s.db, p.OrganizationID, projectID)
}

// SearchProjects reads the projects the principal may see on the project
// itself (its baseline, organization access, or a grant on it), by name:
// exactly named ones, or those whose name contains query, or all.
func (s *Service) SearchProjects(ctx context.Context, p access.Principal, names []string, query string) ([]Project, error) {
	if err := p.Require(access.PermProjectRead); err != nil {
		return nil, err
	}
	all, err := searchProjects(ctx, s.db, p.OrganizationID, names, query)
	if err != nil {
		return nil, err
	}
	out := make([]Project, 0, len(all))
	for _, proj := range all {
		if p.PermissionsOnProject(proj.ID).Has(access.PermProjectRead) && (p.ProjectID == "" || p.ProjectID == proj.ID) {
			out = append(out, proj)
		}
	}
	return out, nil
}

// ProjectWith reads a project the principal holds perm on: one it cannot
// read at all is not found, one it reads without perm is forbidden.
func (s *Service) ProjectWith(ctx context.Context, p access.Principal, projectID string, perm access.Permission) (Project, error) {
	proj, err := projectByID(ctx, s.db, p.OrganizationID, projectID)
	if err != nil {
		return Project{}, err
	}
	return proj, requireOnProject(p, proj.ID, perm)
}

func requireOnProject(p access.Principal, projectID string, perm access.Permission) error {
	on := p.PermissionsOnProject(projectID)
	if !on.Has(access.PermProjectRead) || (p.ProjectID != "" && p.ProjectID != projectID) {
		return fault.ErrNotFound
	}
	if !on.Has(perm) {
		return fmt.Errorf("%w: missing %s on the project", fault.ErrForbidden, perm)
	}
	return nil
}

// UpdateProjectInput changes a project; nil keeps a value.
type UpdateProjectInput struct {
	Name, Description *string
}

// UpdateProject renames or describes a project; it needs project:write on
// the project.
func (s *Service) UpdateProject(ctx context.Context, tx *sqlx.Tx, p access.Principal, projectID string, in UpdateProjectInput) (Project, error) {
	proj, err := lockProject(ctx, tx, p.OrganizationID, projectID)
	if err != nil {
		return Project{}, err
	}
	if err := requireOnProject(p, proj.ID, access.PermProjectWrite); err != nil {
		return Project{}, err
	}
	evidence := map[string]any{}
	if in.Name != nil {
		name, err := ValidateName(*in.Name)
		if err != nil {
			return Project{}, err
		}
		if name != proj.Name {
			evidence["from_name"], evidence["to_name"] = proj.Name, name
		}
		proj.Name = name
	}
	if in.Description != nil {
		if err := validateProjectDescription(*in.Description); err != nil {
			return Project{}, err
		}
		evidence["description_changed"] = *in.Description != proj.Description
		proj.Description = *in.Description
	}
	if err := updateProject(ctx, tx, proj); err != nil {
		return Project{}, err
	}
	return proj, audit.Record(ctx, tx, p, "project.updated", "project", proj.ID, evidence)
}

// DeleteProject deletes a project that holds no workspace, with the team
// grants on it; it needs project:write on the project.
func (s *Service) DeleteProject(ctx context.Context, tx *sqlx.Tx, p access.Principal, projectID string) (Project, error) {
	proj, err := lockProject(ctx, tx, p.OrganizationID, projectID)
	if err != nil {
		return Project{}, err
	}
	if err := requireOnProject(p, proj.ID, access.PermProjectWrite); err != nil {
		return Project{}, err
	}
	if err := deleteEmptyProject(ctx, tx, p.OrganizationID, proj.ID); err != nil {
		return Project{}, err
	}
	return proj, audit.Record(ctx, tx, p, "project.deleted", "project", proj.ID, map[string]any{"name": proj.Name})
}

// ListProjects reads one page of projects, newest first.
func (s *Service) ListProjects(ctx context.Context, p access.Principal, page cursor.Page) ([]Project, error) {
	if err := p.Require(access.PermProjectRead); err != nil {
		return nil, err
	}
	return listProjects(ctx, s.db, p.OrganizationID, page)
}

// CreateWorkspaceInput is what a new workspace needs.
type CreateWorkspaceInput struct {
	ProjectID string
	Name      string
	Settings  ExecutionSettings
	// CloudName, when set, asks for this exact remote-backend selector (the
	// remote-backend API creates workspaces by that name).
	CloudName string
	// ExecutionMode defaults to the organization's default execution mode.
	ExecutionMode string
}

// CreateWorkspace creates a workspace with settings version 1. Its slug and
// cloud name are derived from the name once, made unique within the
// organization, and never change.
func (s *Service) CreateWorkspace(ctx context.Context, tx *sqlx.Tx, p access.Principal, in CreateWorkspaceInput) (Workspace, error) {
	if err := p.Require(access.PermWorkspaceWrite); err != nil {
		return Workspace{}, err
	}
	name, err := ValidateName(in.Name)
	if err != nil {
		return Workspace{}, err
	}
	if err := in.Settings.Validate(s.toolVersions); err != nil {
		return Workspace{}, err
	}
	if p.ProjectID != "" && p.ProjectID != in.ProjectID {
		return Workspace{}, fault.ErrNotFound
	}
	if _, err := projectByID(ctx, tx, p.OrganizationID, in.ProjectID); err != nil {
		return Workspace{}, err
	}
	// Creating in a project needs workspace:write there (a role, the
	// organization's manage flags or a project grant), not anywhere.
	if !p.PermissionsIn("", in.ProjectID).Has(access.PermWorkspaceWrite) {
		return Workspace{}, fmt.Errorf("%w: missing %s in project", fault.ErrForbidden, access.PermWorkspaceWrite)
	}
	if err := lockNames(ctx, tx, p.OrganizationID); err != nil {
		return Workspace{}, err
	}
	if taken, err := nameTaken(ctx, tx, p.OrganizationID, name, ""); err != nil {
		return Workspace{}, err
	} else if taken {
		return Workspace{}, ErrNameTaken
	}
	slugBase, cloudBase := BaseSlug(name), BaseCloudName(name)
	if in.CloudName != "" {
		if BaseCloudName(in.CloudName) != in.CloudName {
			return Workspace{}, fmt.Errorf("%w: cloud name must match ^[A-Za-z0-9_-]{1,90}$", ErrInvalid)
		}
		cloudBase = in.CloudName
	}
	slugs, clouds, err := takenNames(ctx, tx, p.OrganizationID, slugBase, cloudBase)
	if err != nil {
		return Workspace{}, err
	}
	mode := in.ExecutionMode
	if mode == "" {
		if mode, err = organizationExecutionMode(ctx, tx, p.OrganizationID); err != nil {
			return Workspace{}, err
		}
	}
	if mode != ExecutionLocal && mode != ExecutionRemote {
		return Workspace{}, fmt.Errorf("%w: execution mode must be local or remote", ErrInvalid)
	}
	now := s.stamp()
	w := Workspace{
		ID: id.New("ws"), OrganizationID: p.OrganizationID, ProjectID: in.ProjectID, Name: name,
		SettingsVersion: 1, CreatedBy: p.ID, CreatedAt: now, UpdatedAt: now, ExecutionMode: mode,
		ExecutionSettings: in.Settings,
	}
	w.Slug = firstFree(slugBase, func(c string) bool { return slugs[c] })
	w.CloudName = firstFree(cloudBase, func(c string) bool { return clouds[lowerASCII(c)] })
	if in.CloudName != "" && w.CloudName != in.CloudName {
		return Workspace{}, ErrNameTaken
	}
	if err := insertWorkspace(ctx, tx, w); err != nil {
		return Workspace{}, err
	}
	if err := insertSettingsVersion(ctx, tx, w.ID, 1, in.Settings, p.ID); err != nil {
		return Workspace{}, err
	}
	return w, audit.Record(ctx, tx, p, "workspace.created", "workspace", w.ID, map[string]any{
		"name": w.Name, "slug": w.Slug, "cloud_name": w.CloudName, "project_id": w.ProjectID,
		"tool_version": w.ToolVersion, "region": w.Region, "platform": w.Platform,
	})
}

func firstFree(base string, taken func(string) bool) string {
	for n := 1; ; n++ {
		if c := WithSuffix(base, n); !taken(c) {
			return c
		}
	}
}

func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 32
		}
	}
	return string(b)
}

// GetWorkspace reads one workspace with its current settings.
func (s *Service) GetWorkspace(ctx context.Context, p access.Principal, workspaceID string) (Workspace, error) {
	return visibleWorkspace(ctx, s.db, p, workspaceID, access.PermWorkspaceRead, false)
}

// visibleWorkspace loads a workspace of the principal's organization, inside
// its token boundaries, when it holds perm there; forUpdate locks the row.
// A workspace the principal cannot read (outside the boundaries, or
// reached by neither its role nor its teams) is not found, like a missing
// one; a readable one without perm is forbidden.
//
// There is no early p.Require(perm): a principal holding perm nowhere (a
// team token or member without grants) would learn that the workspace
// exists from a 403 where a missing one is 404.
func visibleWorkspace(ctx context.Context, q sqlx.QueryerContext, p access.Principal, workspaceID string, perm access.Permission, forUpdate bool) (Workspace, error) {
	w, err := workspaceByID(ctx, q, p.OrganizationID, workspaceID, forUpdate)
	if err != nil {
		return Workspace{}, err
	}
	if err := p.RequireIn(w.ID, w.ProjectID, perm); err != nil {
		return Workspace{}, err
	}
	return w, nil
}

// WorkspaceWith reads a workspace the principal holds perm in: not found
// when it cannot read the workspace, forbidden without perm there.
func (s *Service) WorkspaceWith(ctx context.Context, p access.Principal, workspaceID string, perm access.Permission) (Workspace, error) {
	return visibleWorkspace(ctx, s.db, p, workspaceID, perm, false)
}

// ListWorkspaces reads one page of workspaces, newest first, optionally of
// one project.
func (s *Service) ListWorkspaces(ctx context.Context, p access.Principal, projectID string, page cursor.Page) ([]Workspace, error) {
	if err := p.Require(access.PermWorkspaceRead); err != nil {
		return nil, err
	}
	return listWorkspaces(ctx, s.db, s.listStatement, s.listsCurrentRuns, p.OrganizationID, projectID, p.WorkspaceScope(), page)
}

// UpdateWorkspaceInput replaces the execution settings (always given in
// full) and optionally renames or changes the execution mode.
type UpdateWorkspaceInput struct {
	Settings      ExecutionSettings
	Name          *string
	ExecutionMode *string
}

// UpdateWorkspace records a new settings version when the settings differ
// from the current ones, and renames when asked. Slug and cloud name never
// change.
func (s *Service) UpdateWorkspace(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID string, in UpdateWorkspaceInput) (Workspace, error) {
	if err := p.Require(access.PermWorkspaceWrite); err != nil {
		return Workspace{}, err
	}
	if err := in.Settings.Validate(s.toolVersions); err != nil {
		return Workspace{}, err
	}
	w, err := visibleWorkspace(ctx, tx, p, workspaceID, access.PermWorkspaceWrite, true)
	if err != nil {
		return Workspace{}, err
	}
	evidence := map[string]any{}
	if in.Name != nil {
		name, err := ValidateName(*in.Name)
		if err != nil {
			return Workspace{}, err
		}
		if name != w.Name {
			if err := lockNames(ctx, tx, p.OrganizationID); err != nil {
				return Workspace{}, err
			}
			if taken, err := nameTaken(ctx, tx, p.OrganizationID, name, w.ID); err != nil {
				return Workspace{}, err
			} else if taken {
				return Workspace{}, ErrNameTaken
			}
			evidence["from_name"], evidence["to_name"] = w.Name, name
			w.Name = name
		}
	}
	if in.ExecutionMode != nil && *in.ExecutionMode != w.ExecutionMode {
		if *in.ExecutionMode != ExecutionLocal && *in.ExecutionMode != ExecutionRemote {
			return Workspace{}, fmt.Errorf("%w: execution mode must be local or remote", ErrInvalid)
		}
		evidence["execution_mode"] = *in.ExecutionMode
		w.ExecutionMode = *in.ExecutionMode
	}
	if in.Settings != w.ExecutionSettings {
		w.SettingsVersion++
		w.ExecutionSettings = in.Settings
		if err := insertSettingsVersion(ctx, tx, w.ID, w.SettingsVersion, in.Settings, p.ID); err != nil {
			return Workspace{}, err
		}
		evidence["settings_version"] = w.SettingsVersion
		evidence["tool_version"], evidence["region"], evidence["platform"] = w.ToolVersion, w.Region, w.Platform
	}
	if len(evidence) == 0 {
		return w, nil
	}
	w.UpdatedAt = s.stamp()
	if err := updateWorkspace(ctx, tx, w); err != nil {
		return Workspace{}, err
	}
	return w, audit.Record(ctx, tx, p, "workspace.updated", "workspace", w.ID, evidence)
}

// writableWorkspace loads a workspace for a variable mutation.
func (s *Service) writableWorkspace(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID string) (Workspace, error) {
	return visibleWorkspace(ctx, tx, p, workspaceID, access.PermVariableWrite, false)
}

// variableForWrite loads and locks a variable the principal may change.
func (s *Service) variableForWrite(ctx context.Context, tx *sqlx.Tx, p access.Principal, variableID string) (Variable, error) {
	if err := p.Require(access.PermVariableWrite); err != nil {
		return Variable{}, err
	}
	v, err := variableByID(ctx, tx, p.OrganizationID, variableID)
	if err != nil {
		return Variable{}, err
	}
	if _, err := s.writableWorkspace(ctx, tx, p, v.WorkspaceID); err != nil {
		return Variable{}, err
	}
	return v, nil
}

// VariableInput is a variable's new content. Value nil means "keep"; on
// replace, an empty Key or Category keeps the current one, and Category is
// terraform when created without one.
type VariableInput struct {
	Key         string
	Category    string
	Value       *string
	Sensitive   bool
	HCL         bool
	Description string
}

func (s *Service) digest(value string) []byte { return ValueDigest(s.digestKey, value) }

// ValueDigest is a variable value's keyed digest, which a run's snapshot
// records and checks the pinned value against. Variable sets use the same
// key, so one check covers both.
func ValueDigest(key []byte, value string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(value))
	return m.Sum(nil)
}

// sealedAssociation binds a sealed value to its variable and value version.
func sealedAssociation(variableID string, version int) []byte {
	return fmt.Appendf(nil, "cairn/workspace-variable/%s/%d", variableID, version)
}

// setValue puts a new value into v (plain or sealed) and returns the
// ciphertext for sensitive values.
func (s *Service) setValue(v *Variable, value string) ([]byte, error) {
	var sealed []byte
	var err error
	v.Value, sealed, v.ValueDigest, err = StoreValue(s.sealer, s.digestKey, value, v.Sensitive, sealedAssociation(v.ID, v.ValueVersion))
	return sealed, err
}

// StoreValue is a variable value as it is stored: in clear, or (when
// sensitive) only sealed, bound to association; with its keyed digest
// either way. Without CAIRN_MASTER_KEY a sensitive value is refused (503).
func StoreValue(sealer *seal.Sealer, digestKey []byte, value string, sensitive bool, association []byte) (plain *string, sealed, digest []byte, err error) {
	digest = ValueDigest(digestKey, value)
	if !sensitive {
		return &value, nil, digest, nil
	}
	sealed, err = sealer.Seal([]byte(value), association)
	if errors.Is(err, seal.ErrNoKey) {
		return nil, nil, nil, fmt.Errorf("sealing a sensitive value without CAIRN_MASTER_KEY: %w", fault.ErrUnavailable)
	}
	return nil, sealed, digest, err
}

// CreateVariable adds a variable to a workspace.
func (s *Service) CreateVariable(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID string, in VariableInput) (Variable, error) {
	w, err := s.writableWorkspace(ctx, tx, p, workspaceID)
	if err != nil {
		return Variable{}, err
	}
	if in.Category == "" {
		in.Category = CategoryTerraform
	}
	if err := s.validateCategoryKey(in.Key, in.Category, in.HCL); err != nil {
		return Variable{}, err
	}
	if in.Value == nil {
		return Variable{}, fmt.Errorf("%w: value is required", ErrInvalid)
	}
	if err := ValidateValue(*in.Value, in.HCL); err != nil {
		return Variable{}, err
	}
	desc, err := ValidateDescription(in.Description)
	if err != nil {
		return Variable{}, err
	}
	now := s.stamp()
	v := Variable{
		ID: id.New("var"), OrganizationID: p.OrganizationID, WorkspaceID: w.ID, Key: in.Key, Category: in.Category,
		Sensitive: in.Sensitive, HCL: in.HCL, Description: desc, ValueVersion: 1, CreatedAt: now, UpdatedAt: now,
	}
	sealed, err := s.setValue(&v, *in.Value)
	if err != nil {
		return Variable{}, err
	}
	if err := insertVariable(ctx, tx, v, sealed); err != nil {
		return Variable{}, err
	}
	return v, audit.Record(ctx, tx, p, "workspace_variable.created", "workspace_variable", v.ID, map[string]any{
		"workspace_id": w.ID, "key": v.Key, "category": v.Category, "sensitive": v.Sensitive, "hcl": v.HCL,
		"value_version": v.ValueVersion,
	})
}

// validateCategoryKey checks a variable's category and key, and that the
// runner does not own an env variable's name.
func (s *Service) validateCategoryKey(key, category string, hcl bool) error {
	if rule := CategoryKeyRule(key, category, hcl); rule != "" {
		return fmt.Errorf("%w: %s", ErrInvalid, rule)
	}
	if category == CategoryEnv && (s.runnerOwnsEnv == nil || s.runnerOwnsEnv(key)) {
		return fmt.Errorf("%w: %s is set by the runner or changes how the sandbox runs", ErrInvalid, key)
	}
	return nil
}

// ReplaceVariable replaces a variable's settings. Without a value the stored
// value, its version and digest stay, which is only possible while
// sensitivity stays the same; with a value the version advances.
func (s *Service) ReplaceVariable(ctx context.Context, tx *sqlx.Tx, p access.Principal, variableID string, in VariableInput) (Variable, error) {
	v, err := s.variableForWrite(ctx, tx, p, variableID)
	if err != nil {
		return Variable{}, err
	}
	return s.replaceVariable(ctx, tx, p, v, in)
}

// VariablePatch is a partial update as the remote-backend protocol sends
// it: nil keeps the current setting.
type VariablePatch struct {
	Key, Category, Value, Description *string
	HCL, Sensitive                    *bool
}

// PatchVariable applies a partial update to a variable of the workspace;
// a variable of another workspace is not found. A plain value may become
// sensitive without being sent again, as HCP allows: it is sealed as it
// stands, under a new value version. A sensitive one never becomes plain
// without a new value.
func (s *Service) PatchVariable(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID, variableID string, patch VariablePatch) (Variable, error) {
	v, err := s.variableForWrite(ctx, tx, p, variableID)
	if err != nil {
		return Variable{}, err
	}
	if v.WorkspaceID != workspaceID {
		return Variable{}, fault.ErrNotFound
	}
	in := VariableInput{Key: v.Key, Category: v.Category, Value: patch.Value, Sensitive: v.Sensitive, HCL: v.HCL, Description: v.Description}
	for dst, src := range map[*string]*string{&in.Key: patch.Key, &in.Category: patch.Category, &in.Description: patch.Description} {
		if src != nil {
			*dst = *src
		}
	}
	if patch.HCL != nil {
		in.HCL = *patch.HCL
	}
	if patch.Sensitive != nil {
		in.Sensitive = *patch.Sensitive
	}
	if in.Value == nil && in.Sensitive && !v.Sensitive {
		in.Value = v.Value
	}
	return s.replaceVariable(ctx, tx, p, v, in)
}

// replaceVariable writes in over v, which the caller read for write.
func (s *Service) replaceVariable(ctx context.Context, tx *sqlx.Tx, p access.Principal, v Variable, in VariableInput) (Variable, error) {
	if in.Key == "" {
		in.Key = v.Key
	}
	if in.Category == "" {
		in.Category = v.Category
	}
	if err := s.validateCategoryKey(in.Key, in.Category, in.HCL); err != nil {
		return Variable{}, err
	}
	desc, err := ValidateDescription(in.Description)
	if err != nil {
		return Variable{}, err
	}
	if in.Value == nil && in.Sensitive != v.Sensitive {
		return Variable{}, ErrVariableValueRequired
	}
	if in.Value == nil && in.HCL && !v.HCL && v.Sensitive {
		// A sealed value cannot be checked as HCL without being sent.
		return Variable{}, ErrVariableValueRequired
	}
	if in.Value == nil && in.HCL && !v.HCL && !v.Sensitive && v.Value != nil {
		// Turning on HCL for a kept plain value must still parse.
		if err := ValidateValue(*v.Value, true); err != nil {
			return Variable{}, err
		}
	}
	v.Key, v.Category, v.HCL, v.Description, v.Sensitive, v.UpdatedAt = in.Key, in.Category, in.HCL, desc, in.Sensitive, s.stamp()
	var sealed []byte
	if in.Value != nil {
		if err := ValidateValue(*in.Value, in.HCL); err != nil {
			return Variable{}, err
		}
		v.ValueVersion++
		if sealed, err = s.setValue(&v, *in.Value); err != nil {
			return Variable{}, err
		}
	}
	if err := updateVariable(ctx, tx, v, sealed, in.Value != nil); err != nil {
		return Variable{}, err
	}
	if v.Sensitive {
		v.Value = nil
	}
	return v, audit.Record(ctx, tx, p, "workspace_variable.replaced", "workspace_variable", v.ID, map[string]any{
		"workspace_id": v.WorkspaceID, "key": v.Key, "category": v.Category, "sensitive": v.Sensitive, "hcl": v.HCL,
		"value_version": v.ValueVersion, "value_changed": in.Value != nil,
	})
}

// DeleteVariable removes a variable and returns what it was (without any
// sensitive value).
func (s *Service) DeleteVariable(ctx context.Context, tx *sqlx.Tx, p access.Principal, variableID string) (Variable, error) {
	v, err := s.variableForWrite(ctx, tx, p, variableID)
	if err != nil {
		return Variable{}, err
	}
	if err := deleteVariable(ctx, tx, p.OrganizationID, v.ID); err != nil {
		return Variable{}, err
	}
	if v.Sensitive {
		v.Value = nil
	}
	return v, audit.Record(ctx, tx, p, "workspace_variable.deleted", "workspace_variable", v.ID, map[string]any{
		"workspace_id": v.WorkspaceID, "key": v.Key,
	})
}

// Variable reads one variable of the workspace (a sensitive value is
// never included). It needs variable:read there; a variable of another
// workspace is not found.
func (s *Service) Variable(ctx context.Context, p access.Principal, workspaceID, variableID string) (Variable, error) {
	vars, err := s.ListVariables(ctx, p, workspaceID)
	if err != nil {
		return Variable{}, err
	}
	for _, v := range vars {
		if v.ID == variableID {
			return v, nil
		}
	}
	return Variable{}, fault.ErrNotFound
}

// ListVariables lists a workspace's variables; sensitive values are never
// included. It needs variable:read there: a team with variables=none sees
// the workspace but not its variables.
func (s *Service) ListVariables(ctx context.Context, p access.Principal, workspaceID string) ([]Variable, error) {
	if _, err := s.WorkspaceWith(ctx, p, workspaceID, access.PermVariableRead); err != nil {
		return nil, err
	}
	vars, err := listVariables(ctx, s.db, p.OrganizationID, workspaceID)
	for i := range vars {
		if vars[i].Sensitive {
			vars[i].Value = nil
		}
	}
	return vars, err
}

// DefaultProject returns the organization's default project, creating it
// on first use, for workspaces created without naming a project.
func (s *Service) DefaultProject(ctx context.Context, tx *sqlx.Tx, p access.Principal) (Project, error) {
	if err := p.Require(access.PermWorkspaceWrite); err != nil {
		return Project{}, err
	}
	if err := lockNames(ctx, tx, p.OrganizationID); err != nil {
		return Project{}, err
	}
	proj, err := projectByName(ctx, tx, p.OrganizationID, DefaultProjectName)
	if !errors.Is(err, fault.ErrNotFound) {
		return proj, err
	}
	return s.createProject(ctx, tx, p, DefaultProjectName, "")
}

// CreateDefaultProject creates the organization's Default Project, as
// HCP Terraform creates it with every organization; createdBy is the
// creator's ID. It runs in the transaction that creates the organization.
func CreateDefaultProject(ctx context.Context, tx *sqlx.Tx, organizationID, createdBy string, at time.Time) (Project, error) {
	proj := Project{ID: id.New("prj"), OrganizationID: organizationID, Name: DefaultProjectName, CreatedBy: createdBy, CreatedAt: at}
	return proj, insertProject(ctx, tx, proj)
}

// DefaultProjectOf reads the organization's Default Project, nil when it
// has none (an organization created before it came with one, whose first
// workspace without a project has not been created yet).
func (s *Service) DefaultProjectOf(ctx context.Context, organizationID string) (*Project, error) {
	proj, err := projectByName(ctx, s.db, organizationID, DefaultProjectName)
	if errors.Is(err, fault.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &proj, nil
}

// GetWorkspaceByCloudName reads a workspace by its remote-backend selector.
func (s *Service) GetWorkspaceByCloudName(ctx context.Context, p access.Principal, cloudName string) (Workspace, error) {
	if err := p.Require(access.PermWorkspaceRead); err != nil {
		return Workspace{}, err
	}
	w, err := WorkspaceByCloudName(ctx, s.db, p.OrganizationID, cloudName)
	if err != nil {
		return Workspace{}, err
	}
	if err := p.RequireIn(w.ID, w.ProjectID, access.PermWorkspaceRead); err != nil {
		return Workspace{}, err
	}
	return w, nil
}

// Holder is how a principal appears as a lock holder.
func Holder(p access.Principal) (kind, id string) { return p.Kind, p.ID }

// WorkspaceForWrite loads and locks (FOR UPDATE) a workspace the principal
// may act on with perm, for mutations of things that belong to it.
func (s *Service) WorkspaceForWrite(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID string, perm access.Permission) (Workspace, error) {
	return s.lockedWorkspace(ctx, tx, p, workspaceID, perm)
}

// lockedWorkspace loads and locks a workspace row the principal may act on.
func (s *Service) lockedWorkspace(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID string, perm access.Permission) (Workspace, error) {
	return visibleWorkspace(ctx, tx, p, workspaceID, perm, true)
}

// LockWorkspace takes the state lock for the principal. A held lock is
// ErrLocked, whoever holds it, except that a run's own CLI finds the lock
// its run holds (a run locks its workspace while it is active).
func (s *Service) LockWorkspace(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID, reason string) (Workspace, error) {
	w, err := s.lockedWorkspace(ctx, tx, p, workspaceID, access.PermStateWrite)
	if err != nil {
		return Workspace{}, err
	}
	if p.Kind == access.KindRun && w.HeldBy(Holder(p)) {
		return w, nil
	}
	if w.Locked() {
		return Workspace{}, ErrLocked
	}
	kind, holder := Holder(p)
	now := s.stamp()
	if len(reason) > 500 {
		reason = reason[:500]
	}
	w.Lock = Lock{LockedByKind: &kind, LockedByID: &holder, LockReason: reason, LockedAt: &now}
	w.UpdatedAt = now
	if err := setLock(ctx, tx, w); err != nil {
		return Workspace{}, err
	}
	return w, audit.Record(ctx, tx, p, "workspace.locked", "workspace", w.ID, nil)
}

// UnlockWorkspace releases a lock the principal holds. No lock is
// ErrNotLocked; someone else's lock is ErrLockedByOther.
func (s *Service) UnlockWorkspace(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID string) (Workspace, error) {
	w, err := s.lockedWorkspace(ctx, tx, p, workspaceID, access.PermStateWrite)
	if err != nil {
		return Workspace{}, err
	}
	if !w.Locked() {
		return Workspace{}, ErrNotLocked
	}
	if p.Kind == access.KindRun && w.HeldBy(Holder(p)) {
		// The lock is the run's, not its CLI's: it is released when the run
		// ends, so the workspace stays locked between plan and apply.
		return w, nil
	}
	if !w.HeldBy(Holder(p)) {
		switch *w.LockedByKind {
		case access.KindRun:
			return Workspace{}, ErrLockedByRun
		case access.KindTeam:
			return Workspace{}, ErrLockedByTeam
		}
		return Workspace{}, ErrLockedByOther
	}
	return s.release(ctx, tx, p, w, "workspace.unlocked")
}

// ForceUnlockWorkspace releases anyone's lock; it needs state:force_unlock.
func (s *Service) ForceUnlockWorkspace(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID string) (Workspace, error) {
	w, err := s.lockedWorkspace(ctx, tx, p, workspaceID, access.PermStateForceUnlock)
	if err != nil {
		return Workspace{}, err
	}
	if !w.Locked() {
		return Workspace{}, ErrNotLocked
	}
	return s.release(ctx, tx, p, w, "workspace.force_unlocked")
}

func (s *Service) release(ctx context.Context, tx *sqlx.Tx, p access.Principal, w Workspace, action string) (Workspace, error) {
	evidence := map[string]any{"holder_kind": *w.LockedByKind, "holder_id": *w.LockedByID}
	w.Lock = Lock{}
	w.UpdatedAt = s.stamp()
	if err := setLock(ctx, tx, w); err != nil {
		return Workspace{}, err
	}
	return w, audit.Record(ctx, tx, p, action, "workspace", w.ID, evidence)
}

// SafeDeleteWorkspace is DeleteWorkspace for a workspace that is unlocked
// and manages no resources: its current state (if any) lists none. The
// row lock taken first keeps a state version from being published in
// between (publishing needs the state lock, which changes the row).
func (s *Service) SafeDeleteWorkspace(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID string) (Workspace, []string, error) {
	w, err := s.lockedWorkspace(ctx, tx, p, workspaceID, access.PermWorkspaceAdmin)
	if err != nil {
		return Workspace{}, nil, err
	}
	if w.Locked() {
		return Workspace{}, nil, ErrLockedCannotDelete
	}
	resources, err := managedResources(ctx, tx, w)
	if err != nil {
		return Workspace{}, nil, err
	}
	if resources > 0 {
		return Workspace{}, nil, ErrManagingResources
	}
	return deleteLockedWorkspace(ctx, tx, p, w)
}

// ForceDeleteWorkspace is DeleteWorkspace as a person or token asks for it
// (HCP's force delete): a workspace that still manages resources is deleted
// only by an organization owner or the operator, or by a workspace admin
// where the organization allows it (allow-force-delete-workspaces).
func (s *Service) ForceDeleteWorkspace(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID string) (Workspace, []string, error) {
	w, err := s.lockedWorkspace(ctx, tx, p, workspaceID, access.PermWorkspaceAdmin)
	if err != nil {
		return Workspace{}, nil, err
	}
	if p.Kind != access.KindOperator && p.Role != access.RoleOwner {
		var allowed bool
		if err := tx.GetContext(ctx, &allowed, `SELECT allow_force_delete_workspaces FROM organizations WHERE id = $1`,
			w.OrganizationID); err != nil {
			return Workspace{}, nil, fmt.Errorf("reading the organization's delete setting: %w", err)
		}
		resources, err := managedResources(ctx, tx, w)
		if err != nil {
			return Workspace{}, nil, err
		}
		if !allowed && resources > 0 {
			return Workspace{}, nil, ErrForceDeleteOwnersOnly
		}
	}
	return deleteLockedWorkspace(ctx, tx, p, w)
}

// managedResources counts the resources of the workspace's current state.
// A state whose resources could not be read (encrypted) counts as managing
// one: deleting what might manage resources is what both delete rules
// guard against.
func managedResources(ctx context.Context, tx *sqlx.Tx, w Workspace) (int, error) {
	var resources int
	if err := tx.GetContext(ctx, &resources, `
		SELECT coalesce((SELECT CASE WHEN resources_counted THEN resource_count ELSE greatest(resource_count, 1) END
			FROM state_versions
			WHERE organization_id = $1 AND workspace_id = $2 AND status = 'finalized' ORDER BY number DESC LIMIT 1), 0)`,
		w.OrganizationID, w.ID); err != nil {
		return 0, fmt.Errorf("reading the workspace's resources: %w", err)
	}
	return resources, nil
}

// DeleteWorkspace removes a workspace with its state history, variables and
// settings, locked or not, and revokes tokens bound to it. It returns the
// object keys of the deleted artifacts; the caller deletes those after the
// transaction commits, so no reference ever points at a missing object.
func (s *Service) DeleteWorkspace(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID string) (Workspace, []string, error) {
	w, err := s.lockedWorkspace(ctx, tx, p, workspaceID, access.PermWorkspaceAdmin)
	if err != nil {
		return Workspace{}, nil, err
	}
	return deleteLockedWorkspace(ctx, tx, p, w)
}

// deleteLockedWorkspace deletes w, whose row the caller locked and whose
// admin permission it checked (lockedWorkspace).
func deleteLockedWorkspace(ctx context.Context, tx *sqlx.Tx, p access.Principal, w Workspace) (Workspace, []string, error) {
	keys, err := deleteWorkspaceTree(ctx, tx, p.OrganizationID, w.ID)
	if err != nil {
		return Workspace{}, nil, err
	}
	return w, keys, audit.Record(ctx, tx, p, "workspace.deleted", "workspace", w.ID, map[string]any{"name": w.Name, "cloud_name": w.CloudName})
}

// Names reads the names of an organization's workspaces by ID, through q,
// for lists of things that belong to workspaces (a page of runs). An ID
// of another organization's or a deleted workspace has no entry. The
// caller has already judged what the principal reaches: a name is shown
// beside something of that workspace the principal may read.
func (s *Service) Names(ctx context.Context, q sqlx.QueryerContext, organizationID string, ids []string) (map[string]string, error) {
	names := make(map[string]string, len(ids))
	if len(ids) == 0 {
		return names, nil
	}
	rows, err := q.QueryxContext(ctx, `SELECT id, name FROM workspaces WHERE organization_id = $1 AND id = ANY($2::text[])`,
		organizationID, pq.Array(ids))
	if err != nil {
		return nil, fmt.Errorf("reading workspace names: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, name string
		if err := rows.Scan(&id, &name); err != nil {
			return nil, fmt.Errorf("reading workspace names: %w", err)
		}
		names[id] = name
	}
	return names, rows.Err()
}
