package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
)

// TestDarkCanaryRunsWhileTheGateIsClosed closes the public gate with one
// canary pair: in the canary workspace a policy builds in a sandbox
// (rechecking admission and holding a capacity lease) and a run plans with
// the real tofu, whose remote backend calls the organization-wide routes
// with its run token; the organization's other workspace is refused and
// keeps nothing.
func TestDarkCanaryRunsWhileTheGateIsClosed(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "canary")
	canary := s.createWorkspace(t, m, "canary", "us")
	other := s.createWorkspace(t, m, "other", "us")
	var set struct{ ID string }
	if st := s.apiJSON(t, http.MethodPost, "/v1/policy-sets", map[string]string{"name": "always-pass"}, &set, m.mutate(uniqueKey("set"))...); st != http.StatusCreated {
		t.Fatalf("policy set: %d", st)
	}
	rewriteControl(t, s, "dark canary", func(doc map[string]any) {
		doc["public_gate"] = false
		doc["canary_allowlist"] = []map[string]string{{"organization_id": m.orgID, "workspace_id": canary}}
	})

	conn, err := sqlx.Open("postgres", s.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	count := func(query string, args ...any) int {
		t.Helper()
		var n int
		if err := conn.Get(&n, query, args...); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// The other workspace: refused, nothing kept.
	before := count(`SELECT count(*) FROM configuration_versions`) + count(`SELECT count(*) FROM policy_versions`) +
		count(`SELECT count(*) FROM runs`)
	for what, path := range map[string]string{
		"configuration": "/v1/workspaces/" + other + "/configuration-versions",
		"policy":        "/v1/workspaces/" + other + "/policy-sets/" + set.ID + "/versions",
	} {
		st, body := call(t, s.Client, http.MethodPost, s.APIURL+path, policyArchive(t, "always-pass"),
			append(m.mutate(uniqueKey(what)), "Content-Type", "application/gzip")...)
		if st != http.StatusServiceUnavailable || !strings.Contains(string(body), "service_unavailable") {
			t.Fatalf("%s upload to the other workspace: %d %s", what, st, body)
		}
	}
	if after := count(`SELECT count(*) FROM configuration_versions`) + count(`SELECT count(*) FROM policy_versions`) +
		count(`SELECT count(*) FROM runs`); after != before {
		t.Fatalf("refused uploads kept %d rows", after-before)
	}

	// The canary: a policy builds and publishes in a sandbox...
	st, body := call(t, s.Client, http.MethodPost, s.APIURL+"/v1/workspaces/"+canary+"/policy-sets/"+set.ID+"/versions",
		policyArchive(t, "always-pass"), append(m.mutate(uniqueKey("pv")), "Content-Type", "application/gzip")...)
	var doc struct{ Data policyVersion }
	if err := json.Unmarshal(body, &doc); st != http.StatusAccepted || err != nil {
		t.Fatalf("canary policy upload: %d %s", st, body)
	}
	deadline := time.Now().Add(90 * time.Second)
	v := doc.Data
	for v.Status == "pending" {
		if time.Now().After(deadline) {
			t.Fatal("the canary's policy build never finished")
		}
		time.Sleep(200 * time.Millisecond)
		s.apiJSON(t, http.MethodGet, "/v1/policy-versions/"+doc.Data.ID, nil, &v, m.cookie()...)
	}
	if v.Status != "published" {
		t.Fatalf("canary policy version %+v", v)
	}
	if n := count(`SELECT count(*) FROM capacity_leases WHERE policy_version_id = $1 AND released_at IS NOT NULL`, v.ID); n != 1 {
		t.Fatalf("the build held %d released leases, want 1", n)
	}
	s.attachPolicy(t, m, canary, v, "hard_mandatory")
	// ...and a run plans through the sandboxed CLI and its policy stage.
	cfg := s.uploadConfiguration(t, m, canary, map[string]string{"main.tf": `resource "terraform_data" "x" { input = "x" }`})
	st, r := s.createRun(t, m, canary, cfg, "plan_only")
	if st != http.StatusCreated {
		t.Fatalf("canary run: %d", st)
	}
	done := s.waitRun(t, m, r.ID, 3*time.Minute, status("planned_and_finished", "errored"))
	if done.Status != "planned_and_finished" {
		reason := ""
		if done.TerminalReason != nil {
			reason = *done.TerminalReason
		}
		t.Fatalf("canary run ended %s (%s): %s", done.Status, reason, s.logsOf(t, m, r.ID))
	}
	if p, _ := s.runPolicy(t, m, r.ID); p.Outcome == nil || *p.Outcome != "pass" {
		t.Fatalf("canary policy stage %+v", p)
	}
}
