package site

import (
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/bff/apiclient"
)

func TestScopeSummary(t *testing.T) {
	t.Parallel()
	ref := namedRef{ID: "x", Name: "x"}
	for _, c := range []struct {
		set  variableSet
		want string
	}{
		{variableSet{Global: true, ProjectIDs: []string{"prj_1"}}, "global"},
		{variableSet{}, "not applied"},
		{variableSet{ProjectIDs: []string{"prj_1"}}, "1 project"},
		{variableSet{WorkspaceIDs: []string{"ws_1", "ws_2"}}, "2 workspaces"},
		{variableSet{Projects: []namedRef{ref, ref}, Workspaces: []namedRef{ref}}, "2 projects · 1 workspace"},
	} {
		if got := c.set.ScopeSummary(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.set, got, c.want)
		}
	}
}

// TestScopeChoicesKeepsWhatTheSetNames: an item the set names is offered
// ticked even when the visible list (its first page) leaves it out, so
// saving the editor never drops it unseen.
func TestScopeChoicesKeepsWhatTheSetNames(t *testing.T) {
	t.Parallel()
	got := scopeChoices([]namedRef{{ID: "ws_z", Name: "zeta"}, {ID: "ws_a", Name: "alpha"}},
		[]namedRef{{ID: "ws_a", Name: "alpha"}, {ID: "ws_b", Name: "bravo"}})
	want := []scopeChoice{{ID: "ws_a", Name: "alpha", Chosen: true}, {ID: "ws_b", Name: "bravo"}, {ID: "ws_z", Name: "zeta", Chosen: true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatal(diff)
	}
}

// TestEditedValue: a sensitive value is write-only, so an empty field
// keeps it, and making it plain needs a new value.
func TestEditedValue(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name         string
		form         url.Values
		wasSensitive bool
		want         *string
		ok           bool
	}{
		{"plain edit sends the value", url.Values{"value": {"v"}}, false, ptr("v"), true},
		{"plain emptied sends empty", url.Values{"value": {""}}, false, ptr(""), true},
		{"secret kept", url.Values{"value": {""}, "sensitive": {"on"}}, true, nil, true},
		{"secret replaced", url.Values{"value": {"new"}, "sensitive": {"on"}}, true, ptr("new"), true},
		{"secret made plain with a value", url.Values{"value": {"shown"}}, true, ptr("shown"), true},
		{"secret made plain without one", url.Values{"value": {""}}, true, nil, false},
	} {
		got, ok := editedValue(postForm(c.form), c.wasSensitive)
		if ok != c.ok || !cmp.Equal(got, c.want) {
			t.Errorf("%s: %v %v, want %v %v", c.name, shown(got), ok, shown(c.want), c.ok)
		}
	}
}

func shown(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// TestVarsetPageMasksAndOffersWritersOnly: a sensitive value is never
// printed, even if an answer carried one; a reader gets the set without
// any form that changes it, a writer every one.
func TestVarsetPageMasksAndOffersWritersOnly(t *testing.T) {
	t.Parallel()
	secret, plain := "the-secret-value", "us-east-1"
	set := variableSet{ID: "varset_1", Name: "shared", Priority: true, Projects: []namedRef{{ID: "prj_1", Name: "apps"}},
		Variables: []setVariable{
			{ID: "vsv_1", Key: "region", Value: &plain, Category: "terraform"},
			{ID: "vsv_2", Key: "TOKEN", Value: &secret, Category: "env", Sensitive: true},
		}}
	reader := renderPage(t, "varset.html", varsetPage{Set: set, Categories: variableCategories})
	writer := renderPage(t, "varset.html", varsetPage{Set: set, Categories: variableCategories, CanWrite: true,
		Projects: []scopeChoice{{ID: "prj_1", Name: "apps", Chosen: true}}})
	for name, html := range map[string]string{"reader": reader, "writer": writer} {
		if strings.Contains(html, secret) || !strings.Contains(html, "sensitive — write only") || !strings.Contains(html, plain) {
			t.Errorf("the %s's page does not mask the sensitive value:\n%s", name, html)
		}
	}
	if n := strings.Count(reader, `action="/organization/variable-sets`); n != 0 {
		t.Errorf("the reader is offered %d set forms", n)
	}
	for _, form := range []string{`id="add-set-variable"`, `id="varset-scope"`, `id="varset-settings"`, `id="delete-varset"`,
		`action="/organization/variable-sets/varset_1/variables/vsv_2/delete"`, `id="scope-project-prj_1" checked`} {
		if !strings.Contains(writer, form) {
			t.Errorf("the writer's page lacks %s", form)
		}
	}
	list := renderPage(t, "varsets.html", varsetsPage{Sets: []variableSet{set}})
	if strings.Contains(list, `id="create-varset"`) || !strings.Contains(list, "1 project") || !strings.Contains(list, "priority") {
		t.Errorf("the reader's list:\n%s", list)
	}
	if list := renderPage(t, "varsets.html", varsetsPage{CanWrite: true}); !strings.Contains(list, `id="create-varset"`) {
		t.Error("the writer's list lacks the create form")
	}
}

// TestEffectiveVariablesSection: each key shows its winner's source and
// the candidates it overrides struck through, never a sensitive value;
// a failed read says so instead of showing an empty table.
func TestEffectiveVariablesSection(t *testing.T) {
	t.Parallel()
	secret, region := "the-secret-value", "eu-west-1"
	sh := &workspaceShell{Workspace: workspaceInfo{ID: "ws_1", Name: "app"}, Tab: "variables",
		Caller: caller{perms: access.NewPermissionSet(access.PermVariableRead)}}
	html := renderPage(t, "workspace-variables.html", variablesPage{workspaceShell: sh, Effective: []effectiveVariable{
		{Key: "region", Category: "terraform", Value: &region, Source: variableSource{Kind: "workspace"},
			Overridden: []variableSource{{Kind: "variable_set", ID: "varset_1", Name: "shared", Scope: "project"}}},
		{Key: "TOKEN", Category: "env", Value: &secret, Sensitive: true,
			Source: variableSource{Kind: "variable_set", ID: "varset_2", Name: "secrets", Scope: "global", Priority: true}},
	}})
	for _, want := range []string{`id="effective-variables"`, `data-key="region" data-category="terraform"`, "this workspace",
		`<del title="overridden by the value on its left">set <a href="/organization/variable-sets/varset_1">shared</a> <span class="muted">(project)</span></del>`,
		`set <a href="/organization/variable-sets/varset_2">secrets</a> <span class="muted">(global)</span> <span class="status s-awaiting_approval priority">priority</span>`,
		"sensitive — write only"} {
		if !strings.Contains(html, want) {
			t.Errorf("the section lacks %s:\n%s", want, html)
		}
	}
	if strings.Contains(html, secret) {
		t.Errorf("the section shows a sensitive value:\n%s", html)
	}
	failed := renderPage(t, "workspace-variables.html", variablesPage{workspaceShell: sh,
		EffectiveProblem: &apiclient.Error{Status: 503, Code: "UNAVAILABLE", RequestID: "req_1"}})
	if !strings.Contains(failed, `id="effective-unavailable"`) || !strings.Contains(failed, "req_1") || strings.Contains(failed, `id="effective-variables"`) {
		t.Errorf("a failed read renders:\n%s", failed)
	}
}
