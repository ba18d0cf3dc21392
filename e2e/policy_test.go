package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/e2e/devstack"
)

// policyDir is the checked-in corpus of policy sets.
func policyDir(t *testing.T, name string) string {
	return filepath.Join(repoRoot(t), "e2e", "testdata", "policies", name)
}

// policyArchive packs one corpus set's .rego files into a .tar.gz.
func policyArchive(t *testing.T, name string) []byte {
	t.Helper()
	files := map[string]string{}
	entries, err := os.ReadDir(policyDir(t, name))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".rego") {
			body, err := os.ReadFile(filepath.Join(policyDir(t, name), e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			files[e.Name()] = string(body)
		}
	}
	return devstack.TarGz(files)
}

type policyVersion struct {
	ID          string  `json:"id"`
	PolicySetID string  `json:"policy_set_id"`
	Number      int     `json:"number"`
	Status      string  `json:"status"`
	FailureCode *string `json:"failure_code"`
	TestsPassed *int    `json:"tests_passed"`
}

// publishPolicy creates a set named after the corpus directory, uploads it
// built in the workspace and waits until the version is published or failed.
func (s *Stack) publishPolicy(t *testing.T, m member, workspaceID, name string) policyVersion {
	t.Helper()
	var set struct{ ID string }
	if st := s.apiJSON(t, http.MethodPost, "/v1/policy-sets", map[string]string{"name": name}, &set, m.mutate(uniqueKey("set"))...); st != http.StatusCreated {
		t.Fatalf("policy set %s: %d", name, st)
	}
	st, body := call(t, s.Client, http.MethodPost, s.APIURL+"/v1/workspaces/"+workspaceID+"/policy-sets/"+set.ID+"/versions",
		policyArchive(t, name), append(m.mutate(uniqueKey("pv")), "Content-Type", "application/gzip")...)
	var doc struct{ Data policyVersion }
	if err := json.Unmarshal(body, &doc); st != http.StatusAccepted || err != nil || doc.Data.Status != "pending" {
		t.Fatalf("upload %s: %d %s", name, st, body)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		var v policyVersion
		s.apiJSON(t, http.MethodGet, "/v1/policy-versions/"+doc.Data.ID, nil, &v, m.cookie()...)
		if v.Status != "pending" {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("policy version %s of %s stayed pending", v.ID, name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *Stack) attachPolicy(t *testing.T, m member, workspaceID string, v policyVersion, mode string) string {
	t.Helper()
	var att struct{ ID string }
	if st := s.apiJSON(t, http.MethodPost, "/v1/workspaces/"+workspaceID+"/policy-attachments", map[string]string{
		"policy_set_id": v.PolicySetID, "policy_version_id": v.ID, "enforcement_mode": mode}, &att, m.mutate(uniqueKey("att"))...); st != http.StatusCreated {
		t.Fatalf("attach %s: %d", v.ID, st)
	}
	return att.ID
}

type runPolicy struct {
	CheckID            *string `json:"check_id"`
	Status             string  `json:"status"`
	Outcome            *string `json:"outcome"`
	ConfigurationError *string `json:"configuration_error"`
	DurationMS         *int    `json:"duration_ms"`
	Gate               struct {
		Open  bool       `json:"open"`
		Until *time.Time `json:"until"`
	} `json:"gate"`
	Results []struct {
		PolicySetName   string  `json:"policy_set_name"`
		EnforcementMode string  `json:"enforcement_mode"`
		Status          string  `json:"status"`
		ErrorCode       *string `json:"error_code"`
		ResultDigest    string  `json:"result_digest"`
		Overridable     bool    `json:"overridable"`
		Findings        []struct {
			ID              string `json:"id"`
			Title           string `json:"title"`
			ResourceAddress string `json:"resource_address"`
		} `json:"findings"`
	} `json:"results"`
	Overrides []struct {
		Expired bool `json:"expired"`
	} `json:"overrides"`
}

func (s *Stack) runPolicy(t *testing.T, m member, runID string) (runPolicy, string) {
	t.Helper()
	raw := s.rawGet(t, m, "/v1/runs/"+runID+"/policy")
	var doc struct{ Data runPolicy }
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		t.Fatalf("run policy %s: %v %s", runID, err, raw)
	}
	return doc.Data, raw
}

// planRun uploads files to the workspace and waits for the plan_and_apply
// run's plan and policy stage to settle.
func (s *Stack) planRun(t *testing.T, m member, workspaceID string, files map[string]string) runView {
	t.Helper()
	cfg := s.uploadConfiguration(t, m, workspaceID, files)
	st, r := s.createRun(t, m, workspaceID, cfg, "plan_and_apply")
	if st != http.StatusCreated {
		t.Fatalf("create run: %d", st)
	}
	return s.waitRun(t, m, r.ID, 90*time.Second, func(r runView) bool {
		return r.PlanStatus != "pending" && r.PlanStatus != "running" && r.Status != "planning" && r.Status != "plan_queued"
	})
}

func (s *Stack) override(t *testing.T, m member, runID, digest string, expires time.Time) (int, string) {
	t.Helper()
	st, body := call(t, s.Client, http.MethodPost, s.APIURL+"/v1/runs/"+runID+"/policy-overrides", mustJSON(map[string]any{
		"policy_result_digest": digest, "justification": "  change window approved by the on-call lead  ",
		"expires_at": expires.UTC().Format(time.RFC3339)}), m.mutate(uniqueKey("override"))...)
	return st, string(body)
}

func (s *Stack) approve(t *testing.T, m member, r runView) (int, string) {
	t.Helper()
	st, body := call(t, s.Client, http.MethodPost, s.APIURL+"/v1/runs/"+r.ID+"/actions/approve", mustJSON(r.binding()), m.mutate(uniqueKey("approve"))...)
	return st, string(body)
}

const (
	taggedConfig = `resource "terraform_data" "web_server" {
  input = { tags = { owner = "team-a", env = "prod" }, size = 3 }
}
resource "terraform_data" "database" {
  input = { tags = { owner = "team-b", env = "prod" } }
}
`
	untaggedConfig = `resource "terraform_data" "WebServer" {
  input = { tags = { owner = "team-a", env = "prod" } }
}
resource "terraform_data" "cache" {
  input = { size = 1 }
}
`
	threeItemsConfig = `resource "terraform_data" "item" {
  count = 3
  input = { tags = { owner = "team-a", env = "prod" }, index = count.index }
}
`
	emptyConfig = `output "nothing" {
  value = "left"
}
`
	leakConfig = `variable "note" {
  type      = string
  sensitive = true
}
resource "terraform_data" "release_notes" {
  input = { tags = { owner = "team-a", env = "prod" }, description = var.note }
}
`
)

// TestPolicyCorpusEndToEnd publishes the checked-in corpus, attaches its
// sets to workspaces and checks, against real tofu plans, each outcome of
// SPEC §3: pass, advisory, soft failure with valid, expired and mismatched
// overrides, hard failure, evaluation error and a set attached twice.
func TestPolicyCorpusEndToEnd(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "policy")
	builder := s.createWorkspace(t, m, "policy-builds", "us")

	// Publication: each set builds in a sandbox; failures carry safe codes.
	want := map[string]string{
		"require-tags": "published", "limit-destroy": "published", "no-sensitive-leak": "published",
		"advisory-naming": "published", "unknown-field": "published", "always-pass": "published",
		"forbidden-builtin": "policy_compile_failed", "failing-tests": "policy_tests_failed",
	}
	versions := map[string]policyVersion{}
	for name := range want {
		versions[name] = s.publishPolicy(t, m, builder, name)
	}
	for name, expected := range want {
		v := versions[name]
		got := v.Status
		if v.FailureCode != nil {
			got = *v.FailureCode
		}
		if got != expected {
			t.Fatalf("%s: %s, want %s", name, got, expected)
		}
		if v.Status == "published" && (v.TestsPassed == nil || *v.TestsPassed == 0) {
			t.Fatalf("%s published without recorded passing tests: %+v", name, v)
		}
	}
	// A failed version can never be attached.
	st, body := call(t, s.Client, http.MethodPost, s.APIURL+"/v1/workspaces/"+builder+"/policy-attachments", mustJSON(map[string]string{
		"policy_version_id": versions["failing-tests"].ID, "enforcement_mode": "advisory"}), m.mutate(uniqueKey("att"))...)
	if st != http.StatusConflict || !strings.Contains(string(body), "POLICY_VERSION_NOT_PUBLISHED") {
		t.Fatalf("attaching a failed version: %d %s", st, body)
	}

	t.Run("passing plans go to approval and apply", func(t *testing.T) {
		t.Parallel()
		ws := s.createWorkspace(t, m, "policy-pass", "us")
		for _, name := range []string{"require-tags", "limit-destroy", "no-sensitive-leak"} {
			s.attachPolicy(t, m, ws, versions[name], "hard_mandatory")
		}
		s.attachPolicy(t, m, ws, versions["advisory-naming"], "advisory")
		r := s.planRun(t, m, ws, map[string]string{"main.tf": taggedConfig})
		pol, _ := s.runPolicy(t, m, r.ID)
		if r.Status != "awaiting_approval" || pol.Outcome == nil || *pol.Outcome != "pass" || len(pol.Results) != 4 || !contains(r.AvailableActions, "approve") {
			t.Fatalf("passing run %s %v, policy %+v", r.Status, r.AvailableActions, pol)
		}
		if st, body := s.approve(t, m, r); st != http.StatusOK {
			t.Fatalf("approve: %d %s", st, body)
		}
		s.waitRun(t, m, r.ID, 90*time.Second, status("applied"))
	})

	t.Run("advisory findings do not block", func(t *testing.T) {
		t.Parallel()
		ws := s.createWorkspace(t, m, "policy-advisory", "us")
		s.attachPolicy(t, m, ws, versions["advisory-naming"], "advisory")
		r := s.planRun(t, m, ws, map[string]string{"main.tf": untaggedConfig})
		pol, _ := s.runPolicy(t, m, r.ID)
		if r.Status != "awaiting_approval" || *pol.Outcome != "advisory_failed" || !contains(r.AvailableActions, "approve") ||
			len(pol.Results[0].Findings) != 1 || pol.Results[0].Findings[0].ResourceAddress != "terraform_data.WebServer" {
			t.Fatalf("advisory run %s %v, policy %+v", r.Status, r.AvailableActions, pol)
		}
	})

	t.Run("hard failure blocks and offers no approval", func(t *testing.T) {
		t.Parallel()
		ws := s.createWorkspace(t, m, "policy-hard", "us")
		att := s.attachPolicy(t, m, ws, versions["require-tags"], "hard_mandatory")
		r := s.planRun(t, m, ws, map[string]string{"main.tf": untaggedConfig})
		pol, raw := s.runPolicy(t, m, r.ID)
		if r.Status != "errored" || r.TerminalReason == nil || *r.TerminalReason != "policy_hard_failed" || pol.Status != "hard_failed" {
			t.Fatalf("hard-failed run %s %v, policy %s", r.Status, r.TerminalReason, raw)
		}
		if len(pol.Results) != 1 || len(pol.Results[0].Findings) != 1 || pol.Results[0].Findings[0].ResourceAddress != "terraform_data.cache" ||
			strings.Contains(raw, `"details"`) {
			t.Fatalf("hard-failed findings: %s", raw)
		}
		// Detaching affects only runs created afterwards.
		if st := s.apiJSON(t, http.MethodDelete, "/v1/workspaces/"+ws+"/policy-attachments/"+att, nil, nil, m.mutate(uniqueKey("detach"))...); st != http.StatusOK {
			t.Fatalf("detach: %d", st)
		}
		if st := s.apiJSON(t, http.MethodDelete, "/v1/workspaces/"+ws+"/policy-attachments/"+att, nil, nil, m.mutate(uniqueKey("detach"))...); st != http.StatusConflict {
			t.Fatalf("second detach: %d, want 409", st)
		}
		after := s.planRun(t, m, ws, map[string]string{"main.tf": untaggedConfig})
		if pol, _ := s.runPolicy(t, m, after.ID); after.Status != "awaiting_approval" || len(pol.Results) != 0 {
			t.Fatalf("run after detach: %s %+v", after.Status, pol)
		}
		if pol, _ := s.runPolicy(t, m, r.ID); pol.Status != "hard_failed" {
			t.Fatalf("the earlier run's evidence changed: %+v", pol)
		}
	})

	t.Run("soft failure needs a valid override for the exact result", func(t *testing.T) {
		t.Parallel()
		ws := s.createWorkspace(t, m, "policy-soft", "us")
		s.attachPolicy(t, m, ws, versions["require-tags"], "soft_mandatory")
		r := s.planRun(t, m, ws, map[string]string{"main.tf": untaggedConfig})
		pol, _ := s.runPolicy(t, m, r.ID)
		if r.Status != "policy_override" || pol.Status != "soft_failed" || !contains(r.AvailableActions, "override_policy") || contains(r.AvailableActions, "approve") {
			t.Fatalf("soft-failed run %s %v, policy %+v", r.Status, r.AvailableActions, pol)
		}
		digest := pol.Results[0].ResultDigest
		if st, body := s.approve(t, m, r); st != http.StatusConflict {
			t.Fatalf("approval with the gate closed: %d %s", st, body)
		}
		// A digest that is not a current soft failure of this run.
		if st, body := s.override(t, m, r.ID, strings.Repeat("ab", 32), time.Now().Add(time.Hour)); st != http.StatusConflict || !strings.Contains(body, "POLICY_RESULT_STALE") {
			t.Fatalf("override with a foreign digest: %d %s", st, body)
		}
		// Too long an expiry is refused before anything is written.
		if st, body := s.override(t, m, r.ID, digest, time.Now().Add(25*time.Hour)); st != http.StatusBadRequest {
			t.Fatalf("override for 25 hours: %d %s", st, body)
		}
		// A short override opens the gate, then expires and closes it.
		if st, body := s.override(t, m, r.ID, digest, time.Now().Add(3*time.Second)); st != http.StatusCreated {
			t.Fatalf("short override: %d %s", st, body)
		}
		opened := s.readRun(t, m, r.ID)
		if opened.Status != "awaiting_approval" || !contains(opened.AvailableActions, "approve") {
			t.Fatalf("after the override: %s %v", opened.Status, opened.AvailableActions)
		}
		time.Sleep(3500 * time.Millisecond)
		expired := s.readRun(t, m, r.ID)
		if contains(expired.AvailableActions, "approve") || !contains(expired.AvailableActions, "override_policy") {
			t.Fatalf("after the override expired: %v", expired.AvailableActions)
		}
		if st, body := s.approve(t, m, expired); st != http.StatusConflict || !strings.Contains(body, "RUN_POLICY_GATE_CLOSED") {
			t.Fatalf("approval after expiry: %d %s", st, body)
		}
		if st, body := s.override(t, m, r.ID, digest, time.Now().Add(time.Hour)); st != http.StatusCreated {
			t.Fatalf("renewed override: %d %s", st, body)
		}
		final := s.readRun(t, m, r.ID)
		if st, body := s.approve(t, m, final); st != http.StatusOK {
			t.Fatalf("approval with a valid override: %d %s", st, body)
		}
		s.waitRun(t, m, r.ID, 90*time.Second, status("applied"))
		// The result digest of another run (same configuration, another
		// plan) does not override a later one.
		second := s.planRun(t, m, ws, map[string]string{"main.tf": untaggedConfig + "resource \"terraform_data\" \"queue\" {\n  input = { size = 2 }\n}\n"})
		if second.Status != "policy_override" {
			t.Fatalf("second run: %s", second.Status)
		}
		if st, body := s.override(t, m, second.ID, digest, time.Now().Add(time.Hour)); st != http.StatusConflict || !strings.Contains(body, "POLICY_RESULT_STALE") {
			t.Fatalf("override with the first run's digest: %d %s", st, body)
		}
		pol, _ = s.runPolicy(t, m, r.ID)
		if len(pol.Overrides) != 2 || !pol.Overrides[1].Expired || pol.Overrides[0].Expired {
			t.Fatalf("override evidence %+v", pol.Overrides)
		}
	})

	t.Run("too many deletions hard-fail", func(t *testing.T) {
		t.Parallel()
		ws := s.createWorkspace(t, m, "policy-destroy", "us")
		first := s.planRun(t, m, ws, map[string]string{"main.tf": threeItemsConfig})
		if st, body := s.approve(t, m, first); st != http.StatusOK {
			t.Fatalf("approve: %d %s", st, body)
		}
		s.waitRun(t, m, first.ID, 90*time.Second, status("applied"))
		s.attachPolicy(t, m, ws, versions["limit-destroy"], "hard_mandatory")
		r := s.planRun(t, m, ws, map[string]string{"main.tf": emptyConfig})
		pol, raw := s.runPolicy(t, m, r.ID)
		if r.Status != "errored" || pol.Status != "hard_failed" || len(pol.Results[0].Findings) != 1 ||
			pol.Results[0].Findings[0].ID != "limit-destroy/too-many-deletions" {
			t.Fatalf("mass deletion run %s, policy %s", r.Status, raw)
		}
	})

	t.Run("a sensitive value flowing into a plain attribute is caught without showing it", func(t *testing.T) {
		t.Parallel()
		ws := s.createWorkspace(t, m, "policy-leak", "us")
		s.setVariable(t, m, ws, "note", canary, true, false)
		s.attachPolicy(t, m, ws, versions["no-sensitive-leak"], "hard_mandatory")
		r := s.planRun(t, m, ws, map[string]string{"main.tf": leakConfig})
		pol, raw := s.runPolicy(t, m, r.ID)
		if r.Status != "errored" || pol.Status != "hard_failed" || len(pol.Results[0].Findings) != 1 ||
			pol.Results[0].Findings[0].ResourceAddress != "terraform_data.release_notes" {
			t.Fatalf("leak run %s, policy %s", r.Status, raw)
		}
		if strings.Contains(raw, canary) || strings.Contains(s.logsOf(t, m, r.ID), canary) {
			t.Fatal("policy evidence shows the sensitive value")
		}
	})

	t.Run("an invalid decision is an error that blocks", func(t *testing.T) {
		t.Parallel()
		ws := s.createWorkspace(t, m, "policy-error", "us")
		s.attachPolicy(t, m, ws, versions["unknown-field"], "advisory")
		s.attachPolicy(t, m, ws, versions["always-pass"], "hard_mandatory")
		r := s.planRun(t, m, ws, map[string]string{"main.tf": taggedConfig})
		pol, raw := s.runPolicy(t, m, r.ID)
		byName := map[string]int{}
		for i, res := range pol.Results {
			byName[res.PolicySetName] = i
		}
		invalid, passing := pol.Results[byName["unknown-field"]], pol.Results[byName["always-pass"]]
		if r.Status != "errored" || r.TerminalReason == nil || *r.TerminalReason != "policy_error" || pol.Status != "errored" ||
			len(pol.Results) != 2 || invalid.ErrorCode == nil || *invalid.ErrorCode != "policy_decision_invalid" || passing.Status != "passed" {
			t.Fatalf("invalid decision run %s, policy %s", r.Status, raw)
		}
	})

	t.Run("a set attached at two scopes fails closed", func(t *testing.T) {
		t.Parallel()
		ws := s.createWorkspace(t, m, "policy-twice", "us")
		var w struct {
			ProjectID string `json:"project_id"`
		}
		s.apiJSON(t, http.MethodGet, "/v1/workspaces/"+ws, nil, &w, m.cookie()...)
		v := versions["always-pass"]
		var projectAttachment struct{ ID string }
		if st := s.apiJSON(t, http.MethodPost, "/v1/policy-sets/"+v.PolicySetID+"/attachments", map[string]string{
			"policy_version_id": v.ID, "enforcement_mode": "advisory", "scope": "project", "scope_id": w.ProjectID}, &projectAttachment,
			m.mutate(uniqueKey("att"))...); st != http.StatusCreated {
			t.Fatalf("project attachment: %d", st)
		}
		s.attachPolicy(t, m, ws, v, "advisory")
		r := s.planRun(t, m, ws, map[string]string{"main.tf": taggedConfig})
		pol, raw := s.runPolicy(t, m, r.ID)
		if r.Status != "errored" || pol.ConfigurationError == nil || *pol.ConfigurationError != "policy_set_attached_at_two_scopes" {
			t.Fatalf("double attachment run %s, policy %s", r.Status, raw)
		}
		// Detaching the project attachment through its set repairs the
		// workspace for the next run.
		if st := s.apiJSON(t, http.MethodDelete, "/v1/policy-sets/"+v.PolicySetID+"/attachments/"+projectAttachment.ID, nil, nil,
			m.mutate(uniqueKey("detach"))...); st != http.StatusOK {
			t.Fatalf("detaching the project attachment: %d", st)
		}
		if next := s.planRun(t, m, ws, map[string]string{"main.tf": taggedConfig}); next.Status != "awaiting_approval" {
			t.Fatalf("run after detaching: %s", next.Status)
		}
	})
}

const softPolicyConfig = `terraform {
  cloud {
    hostname     = %q
    organization = %q
    workspaces {
      name = "guarded"
    }
  }
}

resource "terraform_data" "cache" {
  input = { size = 1 }
}
`

// TestSoftPolicyFailureOverriddenFromTheCLI runs `tofu apply`, and then
// `terraform apply`, in remote mode against a workspace with a
// soft-mandatory policy: the CLI prints the policy check's findings, asks
// to override, and the override it sends lets the apply be confirmed and
// finish.
func TestSoftPolicyFailureOverriddenFromTheCLI(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	t.Run("tofu", func(t *testing.T) { softPolicyOverriddenFromTheCLI(t, s, tofuBinary(t)) })
	t.Run("terraform", func(t *testing.T) { softPolicyOverriddenFromTheCLI(t, s, terraformBinary(t)) })
}

// softPolicyOverriddenFromTheCLI drives one CLI through a soft policy
// failure in its own organization.
func softPolicyOverriddenFromTheCLI(t *testing.T, s *Stack, cli string) {
	m := s.newMember(t, "cli-policy")
	tf := registryCLI(t, s, cli, m.token, fmt.Sprintf(softPolicyConfig, s.APIHost, m.slug))
	tf.run(t, "init")
	auth := []string{"Authorization", "Bearer " + m.token}
	st, body := call(t, s.Client, http.MethodPatch, s.APIURL+"/api/v2/organizations/"+m.slug+"/workspaces/guarded",
		[]byte(`{"data":{"type":"workspaces","attributes":{"execution-mode":"remote"}}}`), append(auth, "Content-Type", "application/vnd.api+json")...)
	if st != http.StatusOK {
		t.Fatalf("switching to remote execution: %d %s", st, body)
	}
	var doc struct{ Data struct{ ID string } }
	_ = json.Unmarshal(body, &doc)
	v := s.publishPolicy(t, m, doc.Data.ID, "require-tags")
	if v.Status != "published" {
		t.Fatalf("require-tags: %+v", v)
	}
	s.attachPolicy(t, m, doc.Data.ID, v, "soft_mandatory")

	// A CLI plan is speculative: the soft failure ends it, with the finding.
	if out := tf.fail(t, "plan"); !strings.Contains(out, "soft failed") || !strings.Contains(out, "terraform_data.cache") {
		t.Fatalf("tofu plan against a soft-mandatory policy:\n%s", out)
	}
	spec := s.newestRun(t, m, doc.Data.ID, 10*time.Second, status("policy_soft_failed"))
	if spec.Kind != "speculative" {
		t.Fatalf("speculative run %+v", spec)
	}

	apply := tf.interactive().start(t, "apply")
	waitForOutput(t, apply, "Do you want to override the soft failed policy check?")
	out := apply.out.String()
	if !strings.Contains(strings.ToLower(out), "workspace policy check") || !strings.Contains(out, "terraform_data.cache") || !strings.Contains(out, "soft_failed") {
		r := s.newestRun(t, m, doc.Data.ID, 10*time.Second, status("policy_override"))
		_, raw := s.runPolicy(t, m, r.ID)
		t.Fatalf("policy check output:\n%s\npolicy: %s", out, raw)
	}
	_, _ = io.WriteString(apply.stdin, "override\n")
	waitForOutput(t, apply, "Do you want to perform these actions")
	_, _ = io.WriteString(apply.stdin, "yes\n")
	if err := apply.wait(t, 90*time.Second); err != nil || !strings.Contains(apply.out.String(), "Apply complete! Resources: 1 added") {
		t.Fatalf("apply after the CLI override (%v):\n%s", err, apply.out.String())
	}
	r := s.newestRun(t, m, doc.Data.ID, 10*time.Second, status("applied"))
	pol, raw := s.runPolicy(t, m, r.ID)
	if pol.Status != "overridden" || len(pol.Overrides) != 1 || !strings.Contains(raw, "remote-backend API") {
		t.Fatalf("overridden run policy: %s", raw)
	}

	// Deleting the workspace removes its runs' policy evidence and
	// attachments; the version built there stays, as versions outlive it.
	if st, body := call(t, s.Client, http.MethodDelete, s.APIURL+"/api/v2/workspaces/"+doc.Data.ID, nil, auth...); st != http.StatusNoContent {
		t.Fatalf("deleting the workspace: %d %s", st, body)
	}
	var after policyVersion
	if st := s.apiJSON(t, http.MethodGet, "/v1/policy-versions/"+v.ID, nil, &after, m.cookie()...); st != http.StatusOK || after.Status != "published" {
		t.Fatalf("version after its workspace was deleted: %d %+v", st, after)
	}
}
