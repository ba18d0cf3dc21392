package v1_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
)

type variableSetView struct {
	ID            string   `json:"id"`
	Name          string   `json:"name"`
	Description   string   `json:"description"`
	Global        bool     `json:"global"`
	Priority      bool     `json:"priority"`
	WorkspaceIDs  []string `json:"workspace_ids"`
	ProjectIDs    []string `json:"project_ids"`
	VariableCount int      `json:"variable_count"`
	Workspaces    []struct {
		ID, Name string
	} `json:"workspaces"`
	Projects []struct {
		ID, Name string
	} `json:"projects"`
	Variables []struct {
		ID           string  `json:"id"`
		Key          string  `json:"key"`
		Value        *string `json:"value"`
		Category     string  `json:"category"`
		Sensitive    bool    `json:"sensitive"`
		ValueVersion int     `json:"value_version"`
	} `json:"variables"`
}

func createVariableSet(t *testing.T, u *apitest.User, body map[string]any) variableSetView {
	t.Helper()
	var s variableSetView
	u.Mutate(http.MethodPost, "/v1/variable-sets", body).MustStatus(t, http.StatusCreated).Data(t, &s)
	return s
}

func projectAndWorkspace(t *testing.T, u *apitest.User, name string) (projectID, workspaceID string) {
	t.Helper()
	var p, w struct{ ID string }
	u.Mutate(http.MethodPost, "/v1/projects", map[string]string{"name": "p-" + name}).MustStatus(t, http.StatusCreated).Data(t, &p)
	u.Mutate(http.MethodPost, "/v1/workspaces", map[string]any{"project_id": p.ID, "name": name,
		"execution_settings": map[string]string{"tool_version": "1.10.6", "region": "us", "platform": "linux_amd64"}}).
		MustStatus(t, http.StatusCreated).Data(t, &w)
	return p.ID, w.ID
}

// TestVariableSetsOnV1 walks a set through /v1: create, read with its
// scope by name and its variables, list by name with a cursor, change,
// scope, variables (a sensitive value never returned by any read), the
// effective view, and delete.
func TestVariableSetsOnV1(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	owner := env.WithOrganization("varsets-v1")
	prj, ws := projectAndWorkspace(t, owner, "web")
	set := createVariableSet(t, owner, map[string]any{"name": "Defaults", "description": "shared values"})
	createVariableSet(t, owner, map[string]any{"name": "beta"})
	createVariableSet(t, owner, map[string]any{"name": "alpha"})
	if set.Global || set.Priority || len(set.WorkspaceIDs) != 0 {
		t.Fatalf("created %+v", set)
	}
	owner.Mutate(http.MethodPost, "/v1/variable-sets", map[string]any{"name": "DEFAULTS"}).MustStatus(t, http.StatusConflict)

	// Byte order: upper case first; two per page.
	var page1, page2 []variableSetView
	first := owner.Get("/v1/variable-sets?limit=2").MustStatus(t, http.StatusOK)
	first.Data(t, &page1)
	var meta struct {
		Meta struct {
			Page struct {
				NextCursor *string `json:"next_cursor"`
			} `json:"page"`
		} `json:"meta"`
	}
	first.JSON(t, &meta)
	if len(page1) != 2 || page1[0].Name != "Defaults" || page1[1].Name != "alpha" || meta.Meta.Page.NextCursor == nil {
		t.Fatalf("first page %+v", page1)
	}
	owner.Get("/v1/variable-sets?limit=2&cursor="+*meta.Meta.Page.NextCursor).MustStatus(t, http.StatusOK).Data(t, &page2)
	if len(page2) != 1 || page2[0].Name != "beta" {
		t.Fatalf("second page %+v", page2)
	}
	var found []variableSetView
	owner.Get("/v1/variable-sets?q=ALP").MustStatus(t, http.StatusOK).Data(t, &found)
	if len(found) != 1 || found[0].Name != "alpha" {
		t.Fatalf("search %+v", found)
	}
	if r := owner.Get("/v1/variable-sets?cursor=!!"); r.Status != http.StatusBadRequest {
		t.Fatalf("bad cursor: %d", r.Status)
	}

	owner.Mutate(http.MethodPut, "/v1/variable-sets/"+set.ID+"/scope", map[string]any{"global": false,
		"workspace_ids": []string{ws}, "project_ids": []string{prj}}).MustStatus(t, http.StatusOK)
	const secret = "v1-set-secret-2d77"
	var created struct {
		ID    string  `json:"id"`
		Value *string `json:"value"`
	}
	owner.Mutate(http.MethodPost, "/v1/variable-sets/"+set.ID+"/variables", map[string]any{"key": "API_TOKEN", "category": "env",
		"value": secret, "sensitive": true}).MustStatus(t, http.StatusCreated).Data(t, &created)
	if created.Value != nil {
		t.Fatal("create returned the sensitive value")
	}
	var region struct{ ID string }
	owner.Mutate(http.MethodPost, "/v1/variable-sets/"+set.ID+"/variables", map[string]any{"key": "region", "value": "eu-west-1",
		"sensitive": false}).MustStatus(t, http.StatusCreated).Data(t, &region)
	owner.Mutate(http.MethodPost, "/v1/variable-sets/"+set.ID+"/variables", map[string]any{"key": "region", "value": "x",
		"sensitive": false}).MustStatus(t, http.StatusConflict)
	owner.Mutate(http.MethodPatch, "/v1/variable-sets/"+set.ID+"/variables/"+region.ID, map[string]any{"value": "us-east-1",
		"sensitive": false}).MustStatus(t, http.StatusOK)
	owner.Mutate(http.MethodPatch, "/v1/variable-sets/"+set.ID, map[string]any{"priority": true}).MustStatus(t, http.StatusOK)

	read := owner.Get("/v1/variable-sets/"+set.ID).MustStatus(t, http.StatusOK)
	if strings.Contains(string(read.Body), secret) {
		t.Fatal("the set's read carries the sensitive value")
	}
	var got variableSetView
	read.Data(t, &got)
	if !got.Priority || got.Description != "shared values" || len(got.Workspaces) != 1 || got.Workspaces[0].Name != "web" ||
		len(got.Projects) != 1 || got.Projects[0].Name != "p-web" || len(got.Variables) != 2 || got.VariableCount != 2 {
		t.Fatalf("read %+v", got)
	}
	for _, v := range got.Variables {
		if v.Key == "region" && (v.Value == nil || *v.Value != "us-east-1" || v.ValueVersion != 2) {
			t.Fatalf("region %+v", v)
		}
	}

	effective := owner.Get("/v1/workspaces/"+ws+"/effective-variables").MustStatus(t, http.StatusOK)
	if strings.Contains(string(effective.Body), secret) {
		t.Fatal("the effective view carries the sensitive value")
	}
	var eff struct {
		Items []struct {
			Key, Category string
			Value         *string
			Source        struct {
				Kind, ID, Scope string
				Priority        bool
			}
			Overridden []struct{ Kind string }
		} `json:"items"`
	}
	effective.Data(t, &eff)
	if len(eff.Items) != 2 || eff.Items[0].Category != "env" || eff.Items[1].Key != "region" || *eff.Items[1].Value != "us-east-1" ||
		eff.Items[1].Source.ID != set.ID || eff.Items[1].Source.Scope != "project" || !eff.Items[1].Source.Priority {
		t.Fatalf("effective %+v", eff)
	}

	owner.Mutate(http.MethodDelete, "/v1/variable-sets/"+set.ID+"/variables/"+region.ID, nil).MustStatus(t, http.StatusNoContent)
	owner.Mutate(http.MethodDelete, "/v1/variable-sets/"+set.ID, nil).MustStatus(t, http.StatusOK)
	owner.Get("/v1/variable-sets/"+set.ID).MustStatus(t, http.StatusNotFound)
}

// TestVariableSetRefusals: what /v1 refuses, and that another
// organization's set or workspace is exactly not found.
func TestVariableSetRefusals(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	owner := env.WithOrganization("varsets-refusals")
	_, ws := projectAndWorkspace(t, owner, "api")
	set := createVariableSet(t, owner, map[string]any{"name": "refusals"})
	vars := "/v1/variable-sets/" + set.ID + "/variables"

	owner.Mutate(http.MethodPost, "/v1/variable-sets", map[string]any{"name": "long", "description": strings.Repeat("d", 513)}).
		MustStatus(t, http.StatusBadRequest)
	owner.Mutate(http.MethodPost, "/v1/variable-sets", map[string]any{"name": "just-long-enough", "description": strings.Repeat("d", 512)}).
		MustStatus(t, http.StatusCreated)
	owner.Mutate(http.MethodPost, "/v1/variable-sets", map[string]any{"description": "no name"}).MustStatus(t, http.StatusBadRequest)
	owner.Mutate(http.MethodPost, vars, map[string]any{"key": "TF_REGION", "category": "env", "hcl": true, "value": "x",
		"sensitive": false}).MustStatus(t, http.StatusBadRequest)
	for _, reserved := range []string{"TF_CLI_ARGS", "TF_CLI_ARGS_plan", "LD_PRELOAD", "PATH", "HOME", "TFE_RUN_ID", "TF_LOG",
		"CAIRN_MASTER_KEY", "SSL_CERT_FILE", "TF_TOKEN_example_com", "AWS_ROLE_ARN"} {
		if r := owner.Mutate(http.MethodPost, vars, map[string]any{"key": reserved, "category": "env", "value": "x", "sensitive": false}); r.Status != http.StatusBadRequest {
			t.Errorf("env %s: %d %s", reserved, r.Status, r.Body)
		}
	}
	owner.Mutate(http.MethodPost, vars, map[string]any{"key": "list", "value": "[1,", "hcl": true, "sensitive": false}).
		MustStatus(t, http.StatusBadRequest)

	// Another organization sees none of it.
	stranger := env.WithOrganization("varsets-stranger")
	stranger.Get("/v1/variable-sets/"+set.ID).MustStatus(t, http.StatusNotFound)
	stranger.Mutate(http.MethodPatch, "/v1/variable-sets/"+set.ID, map[string]any{"name": "mine"}).MustStatus(t, http.StatusNotFound)
	stranger.Mutate(http.MethodPost, vars, map[string]any{"key": "x", "value": "y", "sensitive": false}).MustStatus(t, http.StatusNotFound)
	stranger.Get("/v1/workspaces/"+ws+"/effective-variables").MustStatus(t, http.StatusNotFound)
	theirs := createVariableSet(t, stranger, map[string]any{"name": "theirs"})
	stranger.Mutate(http.MethodPut, "/v1/variable-sets/"+theirs.ID+"/scope", map[string]any{"global": false,
		"workspace_ids": []string{ws}}).MustStatus(t, http.StatusNotFound)

	// A reader reads sets and never changes them.
	reader := env.SignUp("varsets-reader")
	env.Join(owner, reader, "reader")
	reader.Get("/v1/variable-sets/"+set.ID).MustStatus(t, http.StatusOK)
	reader.Get("/v1/workspaces/"+ws+"/effective-variables").MustStatus(t, http.StatusOK)
	reader.Mutate(http.MethodPost, "/v1/variable-sets", map[string]any{"name": "readers"}).MustStatus(t, http.StatusForbidden)
	reader.Mutate(http.MethodPost, vars, map[string]any{"key": "x", "value": "y", "sensitive": false}).MustStatus(t, http.StatusForbidden)
	reader.Mutate(http.MethodPut, "/v1/variable-sets/"+set.ID+"/scope", map[string]any{"global": true}).MustStatus(t, http.StatusForbidden)
}
