package e2e

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// outputsConfig writes a state holding a plain output, a sensitive one and
// a resource whose input only the raw state carries.
const outputsConfig = `resource "terraform_data" "kept" {
  input = "raw-state-only-7d1c"
}

output "region" {
  value = "eu-west-1"
}

output "secret" {
  value     = "s3cr3t-output-42"
  sensitive = true
}
`

// TestReadOutputsAccess: Bob's team has custom access to workspace W with
// state-versions read-outputs. He reads W's outputs on /api/v2 and /v1, the
// sensitive one without its value, and gets no raw state anywhere: not
// from the remote-backend download or the URL a state version names, not
// from /v1's restricted downloads, not from the dashboard and not through
// the agent tools. Each refusal is a 403: W exists for him (his team reads
// it), he lacks state:read there. The refusals hold again once another
// team makes him admin of workspace X, so that he holds state:read,
// artifact:read_sensitive and a fresh step-up, only not in W.
func TestReadOutputsAccess(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	alice := s.newMember(t, "alice")
	w := s.createWorkspace(t, alice, "outputs", "us")
	x := s.createWorkspace(t, alice, "elsewhere", "us")
	cfg := s.uploadConfiguration(t, alice, w, map[string]string{"main.tf": outputsConfig})
	_, applied := s.createRun(t, alice, w, cfg, "plan_and_apply")
	s.approveAndWait(t, alice, s.waitRun(t, alice, applied.ID, 2*time.Minute, status("awaiting_approval")))

	bob := s.teamMember(t, alice, "bob")
	bobUser := s.username(t, bob)
	readers := s.createTeam(t, alice, "readers")
	s.teamUsers(t, alice, readers, bobUser, true)
	s.grantWorkspace(t, alice, readers, w, map[string]any{"access": "custom", "runs": "read", "variables": "none",
		"state-versions": "read-outputs", "sentinel-mocks": "none", "workspace-locking": false, "run-tasks": false})
	agent := connectGoAgent(t, s, bob)
	dash := withCSRF(t, agent.dashboard)

	// Bob finds the state version his team may read the outputs of through
	// the run that wrote it.
	run := s.readRun(t, bob, applied.ID)
	if run.Apply.StateVersionID == nil {
		t.Fatalf("the applied run names no state version: %+v", run.Apply)
	}
	sv := *run.Apply.StateVersionID
	secrets := []string{"s3cr3t-output-42", "raw-state-only-7d1c"}
	leaks := func(what string, body []byte) {
		t.Helper()
		for _, secret := range secrets {
			if strings.Contains(string(body), secret) {
				t.Errorf("%s hands Bob %q:\n%.600s", what, secret, body)
			}
		}
	}

	// Outputs: the plain value, the sensitive one masked.
	st, body := s.tfe(t, bob, http.MethodGet, "/workspaces/"+w+"/current-state-version-outputs", nil)
	var v2 struct {
		Data []struct {
			Attributes struct {
				Name      string          `json:"name"`
				Sensitive bool            `json:"sensitive"`
				Value     json.RawMessage `json:"value"`
			} `json:"attributes"`
		} `json:"data"`
	}
	if st != http.StatusOK || json.Unmarshal(body, &v2) != nil || len(v2.Data) != 2 {
		t.Errorf("/api/v2 current-state-version-outputs: %d %s", st, body)
	}
	for _, o := range v2.Data {
		if a := o.Attributes; (a.Name == "region") != (string(a.Value) == `"eu-west-1"`) || a.Sensitive != (a.Name == "secret") {
			t.Errorf("/api/v2 output %s: %+v", a.Name, a)
		}
	}
	leaks("/api/v2 current-state-version-outputs", body)
	st, body = s.tfe(t, bob, http.MethodGet, "/state-versions/"+sv+"/outputs", nil)
	if st != http.StatusOK || !strings.Contains(string(body), "eu-west-1") {
		t.Errorf("/api/v2 state version outputs: %d %s", st, body)
	}
	leaks("/api/v2 state version outputs", body)
	var v1 []struct {
		Name      string          `json:"name"`
		Sensitive bool            `json:"sensitive"`
		Value     json.RawMessage `json:"value"`
	}
	if st := s.apiJSON(t, http.MethodGet, "/v1/state-versions/"+sv+"/outputs", nil, &v1, bob.cookie()...); st != http.StatusOK || len(v1) != 2 {
		t.Errorf("/v1 outputs: %d %+v", st, v1)
	}
	for _, o := range v1 {
		if (o.Name == "region") != (string(o.Value) == `"eu-west-1"`) || o.Sensitive != (o.Name == "secret") ||
			(o.Sensitive && string(o.Value) != "null") {
			t.Errorf("/v1 output %s: %s sensitive %v", o.Name, o.Value, o.Sensitive)
		}
	}
	leaks("/v1 outputs", []byte(s.rawGet(t, bob, "/v1/state-versions/"+sv+"/outputs")))

	// The URL a state version names, as Alice (state:read) is given it.
	st, body = s.tfe(t, alice, http.MethodGet, "/workspaces/"+w+"/current-state-version", nil)
	var current struct {
		Data struct {
			Attributes struct {
				URL string `json:"hosted-state-download-url"`
			} `json:"attributes"`
		} `json:"data"`
	}
	if st != http.StatusOK || json.Unmarshal(body, &current) != nil || !strings.HasPrefix(current.Data.Attributes.URL, "https://") {
		t.Fatalf("Alice's current state version: %d %s", st, body)
	}
	hostedURL := current.Data.Attributes.URL

	noRawState := func(when string) {
		t.Helper()
		forbidden := func(what string, st int, body []byte) {
			t.Helper()
			if st != http.StatusForbidden {
				t.Errorf("%s: %s answered %d, want 403", when, what, st)
			}
			leaks(when+": "+what, body)
		}
		// The remote-backend API: the download, the hosted URL (an
		// authenticated path, not a signed capability) and the version
		// and current-version reads that would name it.
		st, body := s.tfe(t, bob, http.MethodGet, "/state-versions/"+sv+"/download", nil)
		forbidden("/api/v2 state-versions/{id}/download", st, body)
		st, body = call(t, s.Client, http.MethodGet, hostedURL, nil, "Authorization", "Bearer "+bob.token)
		forbidden("hosted-state-download-url", st, body)
		st, body = s.tfe(t, bob, http.MethodGet, "/workspaces/"+w+"/current-state-version", nil)
		forbidden("/api/v2 current-state-version", st, body)
		if strings.Contains(string(body), "hosted-state-download-url") {
			t.Errorf("%s: current-state-version names a download URL to Bob: %s", when, body)
		}
		st, body = s.tfe(t, bob, http.MethodGet, "/state-versions/"+sv, nil)
		forbidden("/api/v2 state-versions/{id}", st, body)
		st, body = s.tfe(t, bob, http.MethodGet, "/plans/plan_"+strings.TrimPrefix(run.ID, "run_")+"/json-output", nil)
		forbidden("/api/v2 plan JSON output", st, body)

		// /v1: metadata, history and the restricted downloads, after a
		// fresh step-up of Bob's session.
		if st := s.apiJSON(t, http.MethodPost, "/api/auth/reauthenticate", map[string]string{"password": "correct horse battery staple"},
			nil, bob.cookie()...); st != http.StatusOK {
			t.Fatalf("%s: Bob's step-up: %d", when, st)
		}
		st, body = call(t, s.Client, http.MethodGet, s.APIURL+"/v1/state-versions/"+sv, nil, bob.cookie()...)
		forbidden("/v1 state version", st, body)
		st, body = call(t, s.Client, http.MethodGet, s.APIURL+"/v1/workspaces/"+w+"/state-versions", nil, bob.cookie()...)
		forbidden("/v1 state history", st, body)
		form := []byte(url.Values{"reason": {"checking the outputs guard"}}.Encode())
		for _, path := range []string{"/v1/state-versions/" + sv + "/download", "/v1/runs/" + run.ID + "/downloads/plan-json",
			"/v1/runs/" + run.ID + "/downloads/plan"} {
			st, body = call(t, s.Client, http.MethodPost, s.APIURL+path, form, append(bob.cookie(), "Content-Type", "application/x-www-form-urlencoded")...)
			forbidden("restricted download "+path, st, body)
		}

		// The dashboard: no state download on the run page, the form's
		// URL refused, the states tab without state.
		runPage := dash.page(t, "/runs/"+run.ID)
		if strings.Contains(runPage, `id="download-state"`) || strings.Contains(runPage, `id="download-plan-json"`) {
			t.Errorf("%s: the run page offers Bob a raw download", when)
		}
		leaks(when+": the run page", []byte(runPage))
		st, body = dash.form(t, "/runs/"+run.ID+"/downloads/state",
			map[string]string{"reason": "checking the outputs guard", "password": "correct horse battery staple"})
		if !strings.Contains(string(body), "You do not have permission for that download.") {
			t.Errorf("%s: the dashboard's state download answered %d:\n%.600s", when, st, body)
		}
		leaks(when+": the dashboard's state download", body)
		leaks(when+": the states tab", []byte(dash.page(t, "/workspaces/"+w+"/states")))

		// The agent tools read state metadata with state:read only.
		for _, c := range []struct {
			tool string
			args map[string]any
		}{{"get_state_version", map[string]any{"id": sv}}, {"list_state_versions", map[string]any{"workspace_id": w}}} {
			if text := agent.toolError(t, c.tool, c.args); !strings.Contains(text, "403") {
				t.Errorf("%s: the agent's %s: %s", when, c.tool, text)
			}
		}
	}
	noRawState("with read-outputs only")

	// Admin of another workspace: state:read, artifact:read_sensitive and
	// a step-up, only not in W.
	ops := s.createTeam(t, alice, "ops")
	s.grantWorkspace(t, alice, ops, x, map[string]any{"access": "admin"})
	s.teamUsers(t, alice, ops, bobUser, true)
	noRawState("with admin elsewhere")
}
