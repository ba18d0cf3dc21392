package varset_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/varset"
)

type harness struct {
	t     *testing.T
	ctx   context.Context
	env   *apitest.Env
	owner *apitest.User
	sets  *varset.Service
}

func setup(t *testing.T) *harness {
	t.Helper()
	env := apitest.New(t)
	return &harness{t: t, ctx: context.Background(), env: env, owner: env.WithOrganization("varsets"),
		sets: env.Server.Services().Varsets}
}

// principal is the owner as a service principal.
func (h *harness) principal() access.Principal {
	return access.Principal{Kind: access.KindUser, ID: h.owner.ID, OrganizationID: h.owner.OrganizationID,
		Role: access.RoleOwner, Permissions: access.PermissionsOf(access.RoleOwner)}
}

func (h *harness) project(name string) string {
	h.t.Helper()
	var p struct{ ID string }
	h.owner.Mutate(http.MethodPost, "/v1/projects", map[string]string{"name": name}).MustStatus(h.t, http.StatusCreated).Data(h.t, &p)
	return p.ID
}

func (h *harness) workspace(projectID, name string) string {
	h.t.Helper()
	var w struct{ ID string }
	h.owner.Mutate(http.MethodPost, "/v1/workspaces", map[string]any{"project_id": projectID, "name": name,
		"execution_settings": map[string]string{"tool_version": "1.10.6", "region": "us", "platform": "linux_amd64"}}).
		MustStatus(h.t, http.StatusCreated).Data(h.t, &w)
	return w.ID
}

func (h *harness) tx(fn func(tx *sqlx.Tx) error) error { return db.WithTx(h.ctx, h.env.DB, fn) }

func (h *harness) create(name string, global, priority bool) varset.Set {
	h.t.Helper()
	var s varset.Set
	if err := h.tx(func(tx *sqlx.Tx) (err error) {
		s, err = h.sets.Create(h.ctx, tx, h.principal(), varset.SetInput{Name: &name, Global: &global, Priority: &priority})
		return err
	}); err != nil {
		h.t.Fatal(err)
	}
	return s
}

func (h *harness) variable(setID, key, category, value string, sensitive bool) varset.Variable {
	h.t.Helper()
	var v varset.Variable
	if err := h.tx(func(tx *sqlx.Tx) (err error) {
		v, err = h.sets.CreateVariable(h.ctx, tx, h.principal(), setID, varset.VariableInput{Key: key, Category: category,
			Value: &value, Sensitive: sensitive})
		return err
	}); err != nil {
		h.t.Fatal(err)
	}
	return v
}

func (h *harness) scope(setID string, global bool, workspaces, projects []string) (varset.Set, error) {
	var s varset.Set
	err := h.tx(func(tx *sqlx.Tx) (err error) {
		s, err = h.sets.ReplaceScope(h.ctx, tx, h.principal(), setID, global, workspaces, projects)
		return err
	})
	return s, err
}

// winners is the effective winner of each key: its source name.
func (h *harness) winners(workspaceID string) map[string]varset.Candidate {
	h.t.Helper()
	cands, err := h.sets.Effective(h.ctx, h.principal(), workspaceID)
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]varset.Candidate{}
	for _, c := range cands {
		if c.Wins {
			out[c.Category+"/"+c.Key] = c
		}
	}
	return out
}

// TestScopeDecidesWhatApplies follows one set through its scope changes:
// listed on a project it reaches the project's workspaces only, listed on a
// workspace that workspace, global every workspace (and its lists are
// cleared), and a workspace deleted leaves the set's list by cascade.
func TestScopeDecidesWhatApplies(t *testing.T) {
	t.Parallel()
	h := setup(t)
	prj, other := h.project("apps"), h.project("data")
	inApps, inData := h.workspace(prj, "web"), h.workspace(other, "warehouse")
	set := h.create("regions", false, false)
	h.variable(set.ID, "region", "terraform", "eu-west-1", false)

	applies := func(ws string) bool {
		_, ok := h.winners(ws)["terraform/region"]
		return ok
	}
	if applies(inApps) || applies(inData) {
		t.Fatal("a set without scope applies")
	}
	if _, err := h.scope(set.ID, false, nil, []string{prj}); err != nil {
		t.Fatal(err)
	}
	if !applies(inApps) || applies(inData) {
		t.Fatal("a project set reaches exactly its project's workspaces")
	}
	got, err := h.scope(set.ID, false, []string{inData}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if applies(inApps) || !applies(inData) || len(got.ProjectIDs) != 0 || len(got.WorkspaceIDs) != 1 {
		t.Fatalf("replacing the scope with one workspace: %+v", got)
	}
	sets, err := h.sets.ForWorkspace(h.ctx, h.principal(), inData)
	if err != nil || len(sets) != 1 || sets[0].ID != set.ID {
		t.Fatalf("sets for the workspace: %+v %v", sets, err)
	}

	// Making the set global clears its lists (as HCP Terraform does).
	global := true
	if err := h.tx(func(tx *sqlx.Tx) error {
		s, err := h.sets.Update(h.ctx, tx, h.principal(), set.ID, varset.SetInput{Global: &global})
		if err == nil && (len(s.WorkspaceIDs) != 0 || !s.Global) {
			t.Errorf("global set keeps its list: %+v", s)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !applies(inApps) || !applies(inData) {
		t.Fatal("a global set reaches every workspace")
	}
	if _, err := h.scope(set.ID, true, []string{inApps}, nil); !errors.Is(err, fault.ErrValidation) {
		t.Fatalf("a global scope with a list: %v", err)
	}

	// Deleting a listed workspace removes it from the list.
	if _, err := h.scope(set.ID, false, []string{inApps, inData}, []string{other}); err != nil {
		t.Fatal(err)
	}
	if err := h.tx(func(tx *sqlx.Tx) error {
		_, _, err := h.env.Server.Services().Workspaces.DeleteWorkspace(h.ctx, tx, h.principal(), inData)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	after, err := h.sets.Get(h.ctx, h.principal(), set.ID)
	if err != nil || len(after.WorkspaceIDs) != 1 || after.WorkspaceIDs[0] != inApps || len(after.ProjectIDs) != 1 {
		t.Fatalf("after the workspace was deleted: %+v %v", after, err)
	}

	// A workspace or project of another organization is not found, and a
	// set of another organization is not found either.
	stranger := h.env.WithOrganization("stranger")
	var theirs struct{ ID string }
	stranger.Mutate(http.MethodPost, "/v1/projects", map[string]string{"name": "theirs"}).MustStatus(t, http.StatusCreated).Data(t, &theirs)
	if _, err := h.scope(set.ID, false, nil, []string{theirs.ID}); !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("another organization's project: %v", err)
	}
	strangerP := access.Principal{Kind: access.KindUser, ID: stranger.ID, OrganizationID: stranger.OrganizationID,
		Role: access.RoleOwner, Permissions: access.PermissionsOf(access.RoleOwner)}
	if _, err := h.sets.Get(h.ctx, strangerP, set.ID); !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("another organization's set: %v", err)
	}
}

// TestEffectivePrecedenceOnRealRows builds every tier from real rows and
// checks the winner after each removal from the top.
func TestEffectivePrecedenceOnRealRows(t *testing.T) {
	t.Parallel()
	h := setup(t)
	prj := h.project("tiers")
	ws := h.workspace(prj, "tiered")
	type tier struct {
		name             string
		global, priority bool
		scope            string
	}
	tiers := []tier{
		{"p-global", true, true, "global"}, {"p-project", false, true, "project"}, {"p-workspace", false, true, "workspace"},
		{"workspace variable", false, false, ""},
		{"workspace-set", false, false, "workspace"}, {"project-set", false, false, "project"}, {"global-set", true, false, "global"},
	}
	var remove []func()
	for _, tr := range tiers {
		if tr.name == "workspace variable" {
			var v struct{ ID string }
			h.owner.Mutate(http.MethodPost, "/v1/workspaces/"+ws+"/variables", map[string]any{"key": "region", "value": tr.name, "sensitive": false}).
				MustStatus(t, http.StatusCreated).Data(t, &v)
			remove = append(remove, func() {
				h.owner.Mutate(http.MethodDelete, "/v1/workspace-variables/"+v.ID, nil).MustStatus(t, http.StatusOK)
			})
			continue
		}
		s := h.create(tr.name, tr.global, tr.priority)
		h.variable(s.ID, "region", "terraform", tr.name, false)
		switch tr.scope {
		case "project":
			if _, err := h.scope(s.ID, false, nil, []string{prj}); err != nil {
				t.Fatal(err)
			}
		case "workspace":
			if _, err := h.scope(s.ID, false, []string{ws}, nil); err != nil {
				t.Fatal(err)
			}
		}
		remove = append(remove, func() {
			if err := h.tx(func(tx *sqlx.Tx) error { _, err := h.sets.Delete(h.ctx, tx, h.principal(), s.ID); return err }); err != nil {
				t.Fatal(err)
			}
		})
	}
	for i, tr := range tiers {
		cands, err := h.sets.Effective(h.ctx, h.principal(), ws)
		if err != nil {
			t.Fatal(err)
		}
		if len(cands) != len(tiers)-i || !cands[0].Wins || *cands[0].Value != tr.name {
			t.Fatalf("with %d tiers left: %+v, want %s winning", len(tiers)-i, cands, tr.name)
		}
		remove[i]()
	}
}

// TestSecretsStayOut writes a sensitive set variable and reads every place
// it could leak: the table (sealed, never in clear), the audit log, the
// service's reads and the effective view.
func TestSecretsStayOut(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.workspace(h.project("vault"), "sealed")
	const secret = "varset-secret-7f3a-never-in-clear"
	set := h.create("secrets", true, false)
	v := h.variable(set.ID, "DB_PASSWORD", "env", secret, true)
	if v.Value != nil {
		t.Fatal("create returned the sensitive value")
	}
	var clear int
	if err := h.env.DB.Get(&clear, `SELECT count(*) FROM variable_set_variables WHERE value LIKE '%' || $1 || '%'
		OR position(convert_to($1, 'UTF8') IN sealed_value) > 0`, secret); err != nil || clear != 0 {
		t.Fatalf("%d rows hold the secret in clear (%v)", clear, err)
	}
	var sealed int
	if err := h.env.DB.Get(&sealed, `SELECT count(*) FROM variable_set_variables WHERE id = $1 AND value IS NULL AND length(sealed_value) > 0`,
		v.ID); err != nil || sealed != 1 {
		t.Fatalf("the value is not sealed (%d, %v)", sealed, err)
	}
	newValue := secret + "-rotated"
	if err := h.tx(func(tx *sqlx.Tx) error {
		_, err := h.sets.UpdateVariable(h.ctx, tx, h.principal(), set.ID, v.ID, varset.VariableInput{Value: &newValue, Sensitive: true})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var audited []string
	if err := h.env.DB.Select(&audited, `SELECT action FROM audit_events WHERE organization_id = $1 AND action LIKE 'variable_set%' ORDER BY created_at`,
		h.owner.OrganizationID); err != nil {
		t.Fatal(err)
	}
	want := []string{"variable_set.created", "variable_set_variable.created", "variable_set_variable.updated"}
	if len(audited) != len(want) || audited[0] != want[0] || audited[1] != want[1] || audited[2] != want[2] {
		t.Fatalf("audit %v, want %v", audited, want)
	}
	var leaked int
	if err := h.env.DB.Get(&leaked, `SELECT count(*) FROM audit_events WHERE organization_id = $1 AND evidence::text LIKE '%' || $2 || '%'`,
		h.owner.OrganizationID, secret); err != nil || leaked != 0 {
		t.Fatalf("%d audit rows carry the value (%v)", leaked, err)
	}
	vars, err := h.sets.Variables(h.ctx, h.principal(), set.ID)
	if err != nil || len(vars) != 1 || vars[0].Value != nil || vars[0].ValueVersion != 2 {
		t.Fatalf("variables: %+v %v", vars, err)
	}
	if vars[0].VersionID == v.VersionID {
		t.Fatal("version ID unchanged by an update")
	}
	for _, c := range h.winners(ws) {
		if c.Value != nil && *c.Value != "" && c.Sensitive {
			t.Fatalf("effective view shows a sensitive value: %+v", c)
		}
	}
	if c, ok := h.winners(ws)["env/DB_PASSWORD"]; !ok || c.Value != nil || !c.Sensitive {
		t.Fatalf("effective env variable: %+v", c)
	}
}

// TestPermissions: a reader reads sets but never changes them; a member
// without team grants reads nothing.
func TestPermissions(t *testing.T) {
	t.Parallel()
	h := setup(t)
	set := h.create("shared", true, false)
	reader := access.Principal{Kind: access.KindUser, ID: "usr_reader", OrganizationID: h.owner.OrganizationID,
		Role: access.RoleReader, Permissions: access.PermissionsOf(access.RoleReader)}
	if _, err := h.sets.Get(h.ctx, reader, set.ID); err != nil {
		t.Fatalf("reader reading: %v", err)
	}
	name := "renamed"
	err := h.tx(func(tx *sqlx.Tx) error {
		_, err := h.sets.Update(h.ctx, tx, reader, set.ID, varset.SetInput{Name: &name})
		return err
	})
	if !errors.Is(err, fault.ErrForbidden) {
		t.Fatalf("reader writing: %v", err)
	}
	member := reader
	member.Role, member.Permissions = access.RoleMember, access.PermissionsOf(access.RoleMember)
	if _, _, err := h.sets.List(h.ctx, member, varset.ListQuery{}); !errors.Is(err, fault.ErrForbidden) {
		t.Fatalf("member listing: %v", err)
	}
	bounded := h.principal()
	bounded.Kind, bounded.WorkspaceID = access.KindServiceAccount, "ws_somewhere"
	if _, err := h.sets.Get(h.ctx, bounded, set.ID); !errors.Is(err, fault.ErrForbidden) {
		t.Fatalf("a workspace-bounded token reading an organization's set: %v", err)
	}
}
