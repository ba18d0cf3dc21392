package e2e

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
)

// publishPolicyAs is publishPolicy for a set of its own name built from
// the corpus directory dir, so one corpus can fill several sets.
func (s *Stack) publishPolicyAs(t *testing.T, m member, workspaceID, setName, dir string) policyVersion {
	t.Helper()
	var set struct{ ID string }
	if st := s.apiJSON(t, http.MethodPost, "/v1/policy-sets", map[string]string{"name": setName}, &set, m.mutate(uniqueKey("set"))...); st != http.StatusCreated {
		t.Fatalf("policy set %s: %d", setName, st)
	}
	st, body := call(t, s.Client, http.MethodPost, s.APIURL+"/v1/workspaces/"+workspaceID+"/policy-sets/"+set.ID+"/versions",
		policyArchive(t, dir), append(m.mutate(uniqueKey("pv")), "Content-Type", "application/gzip")...)
	var doc struct{ Data policyVersion }
	if err := json.Unmarshal(body, &doc); st != http.StatusAccepted || err != nil {
		t.Fatalf("upload %s: %d %s", setName, st, body)
	}
	deadline := time.Now().Add(120 * time.Second)
	for {
		var v policyVersion
		s.apiJSON(t, http.MethodGet, "/v1/policy-versions/"+doc.Data.ID, nil, &v, m.cookie()...)
		if v.Status != "pending" {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("policy version %s of %s stayed pending", v.ID, setName)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cloneAttachments puts n more policy sets, each with one published version
// and an active attachment to workspaceID, into the database by copying a
// real published version and attachment row for row (so every column a
// later migration adds is copied too): hundreds of real builds would take
// minutes, and the snapshot under test reads only these rows.
func cloneAttachments(t *testing.T, conn *sqlx.DB, versionID, attachmentID, workspaceID, prefix string, n int) {
	t.Helper()
	tx, err := conn.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	copyVersion := []any{versionID, prefix, n}
	for _, step := range []struct {
		query string
		args  []any
	}{
		{`INSERT INTO policy_sets SELECT (jsonb_populate_record(s, jsonb_build_object('id', $2 || 's' || g, 'name', $2 || g))).*
			FROM policy_versions v JOIN policy_sets s ON s.id = v.policy_set_id, generate_series(1, $3) g WHERE v.id = $1`, copyVersion},
		{`INSERT INTO policy_versions SELECT (jsonb_populate_record(v, jsonb_build_object('id', $2 || 'v' || g,
			'policy_set_id', $2 || 's' || g, 'number', 1))).* FROM policy_versions v, generate_series(1, $3) g WHERE v.id = $1`, copyVersion},
		{`INSERT INTO policy_attachments SELECT (jsonb_populate_record(a, jsonb_build_object('id', $1 || 'a' || g,
			'policy_set_id', $1 || 's' || g, 'policy_version_id', $1 || 'v' || g, 'scope', 'workspace', 'scope_id', $3::text))).*
			FROM policy_attachments a, generate_series(1, $2) g WHERE a.id = $4`, []any{prefix, n, workspaceID, attachmentID}},
	} {
		if _, err := tx.Exec(step.query, step.args...); err != nil {
			t.Fatalf("cloning attachments: %v", err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestPolicyLimitsOfARun proves the per-run policy limits of SPEC §8 on
// one stack:
//
//   - 256 policy attachments evaluated per run: a workspace with 257
//     effective attachments gets a run whose policy stage fails closed
//     with the configuration error policy_attachments_over_limit, and
//     nothing is snapshotted; with one detached, all 256 are snapshotted
//     and no error is recorded.
//   - Complete policy composition 2 MiB: four results of about 445 KB of
//     findings each are kept as they are; five (over 2 MiB together) are
//     each turned into error policy_composition_too_large, never cut.
//   - Policy build 15-minute sandbox lifetime: the configured build
//     timeout (15 minutes by default, 3 s here) ends a build whose test
//     loops, with policy_build_limit_exceeded, long before its CPU
//     ceiling (300 s) would.
func TestPolicyLimitsOfARun(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "limits")
	builder := s.createWorkspace(t, m, "limits-builds", "us")
	versions := map[string]policyVersion{}
	var mu sync.Mutex
	var builds sync.WaitGroup
	for _, name := range []string{"always-pass", "flood-1", "flood-2", "flood-3", "flood-4", "flood-5"} {
		builds.Go(func() {
			dir := name
			if name != "always-pass" {
				dir = "findings-flood"
			}
			v := s.publishPolicyAs(t, m, builder, name, dir)
			mu.Lock()
			versions[name] = v
			mu.Unlock()
		})
	}
	builds.Wait()
	for name, v := range versions {
		if v.Status != "published" {
			t.Fatalf("%s: %s %v", name, v.Status, v.FailureCode)
		}
	}

	// Composition: four floods kept, five turned into errors.
	floods := []string{"flood-1", "flood-2", "flood-3", "flood-4", "flood-5"}
	kept, over := s.createWorkspace(t, m, "limits-four", "us"), s.createWorkspace(t, m, "limits-five", "us")
	for i, name := range floods {
		if i < 4 {
			s.attachPolicy(t, m, kept, versions[name], "advisory")
		}
		s.attachPolicy(t, m, over, versions[name], "advisory")
	}
	policies := map[string]runPolicy{}
	var runs sync.WaitGroup
	for _, ws := range []string{kept, over} {
		runs.Go(func() {
			r := s.planRun(t, m, ws, map[string]string{"main.tf": taggedConfig})
			pol, _ := s.runPolicy(t, m, r.ID)
			mu.Lock()
			policies[ws] = pol
			mu.Unlock()
		})
	}
	runs.Wait()
	if pol := policies[kept]; len(pol.Results) != 4 {
		t.Fatalf("four floods: %+v", pol)
	}
	for _, r := range policies[kept].Results {
		if r.Status != "failed" || len(r.Findings) != 500 || r.ErrorCode != nil {
			t.Errorf("a flood under the composition bound: %s %v, %d findings", r.Status, r.ErrorCode, len(r.Findings))
		}
	}
	if pol := policies[over]; len(pol.Results) != 5 || pol.Outcome == nil || *pol.Outcome != "error" {
		t.Fatalf("five floods: outcome %v, %d results", pol.Outcome, len(pol.Results))
	}
	for _, r := range policies[over].Results {
		if r.Status != "error" || r.ErrorCode == nil || *r.ErrorCode != "policy_composition_too_large" || len(r.Findings) != 0 {
			t.Errorf("a flood over the composition bound: %s %v, %d findings", r.Status, r.ErrorCode, len(r.Findings))
		}
	}

	// Attachments: 257 fail closed, 256 are all snapshotted.
	conn, err := sqlx.Open("postgres", s.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	many := s.createWorkspace(t, m, "limits-many", "us")
	first := s.attachPolicy(t, m, many, versions["always-pass"], "advisory")
	cloneAttachments(t, conn, versions["always-pass"].ID, first, many, "lim", 256)
	var effective int
	if err := conn.Get(&effective, `SELECT count(*) FROM policy_attachments WHERE scope_id = $1 AND status = 'active'`, many); err != nil || effective != 257 {
		t.Fatalf("active attachments: %d %v", effective, err)
	}
	r := s.planRun(t, m, many, map[string]string{"main.tf": taggedConfig})
	r = s.waitRun(t, m, r.ID, 60*time.Second, status("errored", "awaiting_approval", "planned_and_finished"))
	pol, raw := s.runPolicy(t, m, r.ID)
	if pol.ConfigurationError == nil || *pol.ConfigurationError != "policy_attachments_over_limit" || pol.Outcome == nil ||
		*pol.Outcome != "error" || r.Status != "errored" {
		t.Fatalf("a run with 257 attachments: %s, policy %s", r.Status, raw)
	}
	var snapshotted int
	if err := conn.Get(&snapshotted, `SELECT count(*) FROM run_policy_snapshots WHERE run_id = $1`, r.ID); err != nil || snapshotted != 0 {
		t.Fatalf("a refused list was snapshotted: %d %v", snapshotted, err)
	}
	if _, err := conn.Exec(`UPDATE policy_attachments SET status = 'detached', detached_at = now() WHERE id = 'lima256'`); err != nil {
		t.Fatal(err)
	}
	cfg := s.uploadConfiguration(t, m, many, map[string]string{"main.tf": taggedConfig})
	st, at := s.createRun(t, m, many, cfg, "plan_only")
	if st != http.StatusCreated {
		t.Fatalf("create run: %d", st)
	}
	var snapshotError *string
	if err := conn.Get(&snapshotted, `SELECT count(*) FROM run_policy_snapshots WHERE run_id = $1`, at.ID); err != nil || snapshotted != 256 {
		t.Fatalf("a run with 256 attachments snapshotted %d (%v)", snapshotted, err)
	}
	if err := conn.Get(&snapshotError, `SELECT policy_snapshot_error FROM runs WHERE id = $1`, at.ID); err != nil || snapshotError != nil {
		t.Fatalf("a run with 256 attachments recorded %v (%v)", snapshotError, err)
	}
	// The 256 evaluations are not waited for: the clones have no bundles.
	if st := s.apiJSON(t, http.MethodPost, "/v1/runs/"+at.ID+"/actions/cancel", nil, nil, m.mutate(uniqueKey("cancel"))...); st != http.StatusOK {
		t.Fatalf("cancel: %d", st)
	}

	// Build lifetime: a worker whose builds may last 3 s ends a looping
	// test's build there, whatever its CPU ceiling.
	s.KillWorker(t)
	s.StartWorker(t, "CAIRN_POLICY_BUILD_TIMEOUT=3s", "CAIRN_POLICY_BUILD_CPU_SECONDS=300")
	start := time.Now()
	looping := s.publishPolicyAs(t, m, builder, "looping", "looping-test")
	took := time.Since(start)
	if looping.Status != "failed" || looping.FailureCode == nil || *looping.FailureCode != "policy_build_limit_exceeded" {
		t.Fatalf("a looping build under a 3 s lifetime: %s %v", looping.Status, looping.FailureCode)
	}
	if took > 45*time.Second {
		t.Errorf("the looping build ended after %s: its 3 s lifetime did not end it", took)
	}
	t.Logf("composition: 4 results kept, 5 turned into errors; attachments: 257 refused, 256 snapshotted; "+
		"looping build ended after %s under a 3 s build lifetime", took.Round(time.Millisecond))
}
