package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// varsetsConfig outputs what the sandboxed tofu received: the terraform
// variable region, the env-category TF_VAR_from_env, and only a digest of
// the sensitive token (the token itself stays out of state and outputs).
const varsetsConfig = `variable "region" {
  type = string
}

variable "from_env" {
  type = string
}

variable "token" {
  type      = string
  sensitive = true
}

resource "terraform_data" "region" {
  input = var.region
}

output "region" {
  value = var.region
}

output "from_env" {
  value = var.from_env
}

output "token_sha256" {
  value = nonsensitive(sha256(var.token))
}
`

// createVarset creates a variable set through /api/v2 with the member's
// API token and returns its ID.
func (s *Stack) createVarset(t *testing.T, m member, name string, priority bool) string {
	t.Helper()
	id, _ := s.v2Data(t, m.token, http.MethodPost, "/organizations/"+m.slug+"/varsets", map[string]any{"data": map[string]any{
		"type": "varsets", "attributes": map[string]any{"name": name, "global": false, "priority": priority}}}, http.StatusCreated)
	return id
}

// varsetVariable adds a variable to a set through /api/v2.
func (s *Stack) varsetVariable(t *testing.T, m member, setID, key, value, category string, sensitive bool) []byte {
	t.Helper()
	st, body := s.v2(t, m.token, http.MethodPost, "/varsets/"+setID+"/relationships/vars", map[string]any{"data": map[string]any{
		"type": "vars", "attributes": map[string]any{"key": key, "value": value, "category": category, "sensitive": sensitive}}})
	if st != http.StatusCreated {
		t.Fatalf("set variable %s: %d %s", key, st, body)
	}
	return body
}

// applyVarset applies a set to a workspace or project through /api/v2.
func (s *Stack) applyVarset(t *testing.T, m member, setID, typ, id string) {
	t.Helper()
	if st, body := s.v2(t, m.token, http.MethodPost, "/varsets/"+setID+"/relationships/"+typ,
		map[string]any{"data": []map[string]string{{"type": typ, "id": id}}}); st != http.StatusNoContent {
		t.Fatalf("apply %s to %s %s: %d %s", setID, typ, id, st, body)
	}
}

// TestVariableSetsReachTheSandboxInPrecedence runs the real tofu CLI in
// managed runs of a workspace whose project has a variable set. The set
// and a workspace variable both give region: the workspace's value reaches
// the sandbox, with the set's env-category TF_VAR_from_env and its
// sensitive token. A priority set applied to the workspace then wins over
// the workspace variable, and the second run's input snapshot digest
// differs from the first's. The sensitive value is in no run log, API
// response (/v1 and /api/v2), process log or database dump.
func TestVariableSetsReachTheSandboxInPrecedence(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "varsets")
	wsID := s.createWorkspace(t, m, "varsets", "us")
	var ws struct {
		ProjectID string `json:"project_id"`
	}
	if st := s.apiJSON(t, http.MethodGet, "/v1/workspaces/"+wsID, nil, &ws, m.cookie()...); st != http.StatusOK || ws.ProjectID == "" {
		t.Fatalf("workspace: %d %+v", st, ws)
	}
	marker := fmt.Sprintf("varset-secret-%d", time.Now().UnixNano())
	var responses [][]byte
	record := func(b []byte) { responses = append(responses, b) }

	projectSet := s.createVarset(t, m, "project-defaults", false)
	s.applyVarset(t, m, projectSet, "projects", ws.ProjectID)
	record(s.varsetVariable(t, m, projectSet, "region", "from-project-set", "terraform", false))
	record(s.varsetVariable(t, m, projectSet, "token", marker, "terraform", true))
	record(s.varsetVariable(t, m, projectSet, "TF_VAR_from_env", "from-env-category", "env", false))
	s.setVariable(t, m, wsID, "region", "from-workspace", false, false)
	// A key HCP's clients write (a UUID) that no configuration can
	// declare: stored, and left out of tofu's variables with a warning.
	uuidKey := "0e4c8a1b-2c3d-4c1d-9d52-3f2a9c1e77b0"
	record(s.varsetVariable(t, m, projectSet, uuidKey, "never-declared", "terraform", false))

	cfg := s.uploadConfiguration(t, m, wsID, map[string]string{"main.tf": varsetsConfig})
	// apply runs the configuration through approval and apply, checks
	// what reached the sandbox, and returns the run's input snapshot
	// digest.
	apply := func(want string) string {
		t.Helper()
		st, r := s.createRun(t, m, wsID, cfg, "plan_and_apply")
		if st != http.StatusCreated {
			t.Fatalf("create run: %d", st)
		}
		r = s.waitRun(t, m, r.ID, 2*time.Minute, status("awaiting_approval", "errored", "plan_credentials_required"))
		if r.Status != "awaiting_approval" {
			t.Fatalf("plan: %+v\n%s", r, s.logsOf(t, m, r.ID))
		}
		if st := s.apiJSON(t, http.MethodPost, "/v1/runs/"+r.ID+"/actions/approve", r.binding(), nil, m.mutate(uniqueKey("approve"))...); st != http.StatusOK {
			t.Fatalf("approve: %d", st)
		}
		applied := s.waitRun(t, m, r.ID, 2*time.Minute, status("applied", "errored", "recovery_required"))
		logs := s.logsOf(t, m, r.ID)
		if applied.Status != "applied" {
			t.Fatalf("apply: %+v\n%s", applied, logs)
		}
		record([]byte(logs))
		if !strings.Contains(logs, "variable \""+uuidKey+"\" is not passed to tofu") {
			t.Fatalf("the plan log does not say the UUID-keyed variable was left out:\n%s", logs)
		}
		_, _, state := s.currentState(t, m, wsID)
		record([]byte(state))
		var doc struct {
			Outputs map[string]struct{ Value string } `json:"outputs"`
		}
		if err := json.Unmarshal([]byte(state), &doc); err != nil {
			t.Fatalf("state: %v", err)
		}
		sum := sha256.Sum256([]byte(marker))
		got := map[string]string{}
		for k, o := range doc.Outputs {
			got[k] = o.Value
		}
		if got["region"] != want || got["from_env"] != "from-env-category" || got["token_sha256"] != hex.EncodeToString(sum[:]) {
			t.Fatalf("outputs %v, want region %q, the env-category value and the token's digest", got, want)
		}
		for _, path := range []string{"/v1/runs/" + r.ID, "/v1/runs/" + r.ID + "/plan-changes"} {
			_, body := call(t, s.Client, http.MethodGet, s.APIURL+path, nil, m.cookie()...)
			record(body)
		}
		var pinned struct {
			Pinned struct {
				InputSnapshotDigest string `json:"input_snapshot_digest"`
			} `json:"pinned"`
		}
		s.apiJSON(t, http.MethodGet, "/v1/runs/"+r.ID, nil, &pinned, m.cookie()...)
		if pinned.Pinned.InputSnapshotDigest == "" {
			t.Fatalf("run %s pinned no input snapshot digest", r.ID)
		}
		return pinned.Pinned.InputSnapshotDigest
	}

	// The workspace variable beats the project-scoped set.
	first := apply("from-workspace")

	// A priority set applied to the workspace beats the workspace variable.
	prioritySet := s.createVarset(t, m, "priority-overrides", true)
	record(s.varsetVariable(t, m, prioritySet, "region", "from-priority-set", "terraform", false))
	s.applyVarset(t, m, prioritySet, "workspaces", wsID)
	second := apply("from-priority-set")
	if first == second {
		t.Fatalf("both runs pinned input snapshot digest %s", first)
	}

	// Every way the sets read back: /api/v2 with includes, the variable
	// lists, /v1's set and effective-variables views and the audit trail.
	for _, path := range []string{"/varsets/" + projectSet + "?include=vars,workspaces,projects", "/varsets/" + projectSet + "/relationships/vars",
		"/organizations/" + m.slug + "/varsets?include=vars", "/workspaces/" + wsID + "/varsets?include=vars"} {
		st, body := s.v2(t, m.token, http.MethodGet, path, nil)
		if st != http.StatusOK {
			t.Fatalf("GET /api/v2%s: %d %s", path, st, body)
		}
		record(body)
	}
	if _, body := s.v2(t, m.token, http.MethodGet, "/varsets/"+projectSet+"?include=vars", nil); !bytes.Contains(body, []byte(`"key":"token"`)) {
		t.Fatalf("the set read lacks its sensitive variable: %s", body)
	}
	for _, path := range []string{"/v1/variable-sets/" + projectSet, "/v1/variable-sets", "/v1/workspaces/" + wsID + "/effective-variables",
		"/v1/audit-events?limit=100"} {
		st, body := call(t, s.Client, http.MethodGet, s.APIURL+path, nil, m.cookie()...)
		if st != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, st, body)
		}
		record(body)
	}
	for _, body := range responses {
		if strings.Contains(string(body), marker) {
			t.Fatalf("the sensitive set value reached a response or log: %s", body)
		}
	}
	if strings.Contains(s.Logs(), marker) {
		t.Fatal("the process logs hold the sensitive set value")
	}
	dump := withDecodedBytea(dumpDatabase(t, s.DatabaseURL))
	if !bytes.Contains(dump, []byte("from-priority-set")) {
		t.Fatal("the dump does not hold the set values it should (is the scan looking at the right database?)")
	}
	for _, form := range [][]byte{[]byte(marker), []byte(hex.EncodeToString([]byte(marker)))} {
		if i := bytes.Index(dump, form); i >= 0 {
			t.Fatalf("the database dump holds the sensitive set value: …%q…", excerpt(dump, i))
		}
	}
}
