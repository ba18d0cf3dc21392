package e2e

import (
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
)

// exfiltratingConfiguration is what an attacker's configuration does with
// built-ins alone: it reads the process environment, every file the runner
// keeps beside it (the variables file, the CLI configuration with a run
// token) and the variables it is given, and prints them in the spellings a
// log masker could miss. Its variables have defaults, so it plans whether
// it is given them or not.
const exfiltratingConfiguration = `variable "db_password" {
  type    = string
  default = "withheld"
}
variable "api_key" {
  type    = string
  default = "withheld"
}
locals {
  private = "${path.cwd}/../.cairn"
  environ = try(filebase64("/proc/self/environ"), "unreadable")
  files   = try(fileset(local.private, "**"), [])
  tfvars  = try(file("${local.private}/inputs.tfvars"), "unreadable")
  tofurc  = try(file("${local.private}/tofurc"), "unreadable")
  values  = "${var.db_password}|${var.api_key}"
}
output "environ" { value = local.environ }
output "private_files" { value = local.files }
output "tfvars" { value = local.tfvars }
output "tfvars_base64" { value = base64encode(local.tfvars) }
output "tofurc" { value = local.tofurc }
output "values" { value = local.values }
output "values_base64" { value = base64encode(local.values) }
output "values_url" { value = urlencode(local.values) }
output "values_utf16" { value = textencodebase64(local.values, "UTF-16LE") }
output "values_reversed" { value = join("", reverse(split("", local.values))) }
resource "terraform_data" "leak" {
  input = local.environ
}
`

// spellings are the ways a secret could be written out: as is, in every
// base64 alphabet, URL-encoded, in hex, reversed and as UTF-16.
func spellings(secret string) []string {
	runes := []rune(secret)
	slices.Reverse(runes)
	var utf16le []byte
	for _, u := range utf16.Encode([]rune(secret)) {
		utf16le = append(utf16le, byte(u), byte(u>>8))
	}
	out := []string{secret, url.QueryEscape(secret), url.PathEscape(secret), hex.EncodeToString([]byte(secret)), string(runes),
		base64.StdEncoding.EncodeToString(utf16le)}
	// A secret inside a longer base64 text is spelled one of three ways,
	// by its offset modulo three; the middle of each is what must not
	// appear.
	for shift := range 3 {
		enc := base64.StdEncoding.EncodeToString(append(make([]byte, shift), secret...))
		core := enc[(shift*4+2)/3+1 : len(enc)-4]
		out = append(out, core, strings.NewReplacer("+", "-", "/", "_").Replace(core))
	}
	return out
}

// leaked names the first spelling of a secret found in body.
func leaked(body string, secrets ...string) string {
	for _, secret := range secrets {
		for _, form := range spellings(secret) {
			if strings.Contains(body, form) {
				return form
			}
		}
	}
	return ""
}

// planJSONDownload is a person's restricted download of a run's raw plan
// JSON (sensitive values included).
func (s *Stack) planJSONDownload(t *testing.T, m member, runID string) string {
	t.Helper()
	st, body := call(t, s.Client, http.MethodPost, s.APIURL+"/v1/runs/"+runID+"/downloads/plan-json",
		[]byte(url.Values{"reason": {"checking what the plan saw"}}.Encode()),
		append(m.cookie(), "Content-Type", "application/x-www-form-urlencoded")...)
	if st != http.StatusOK {
		t.Fatalf("plan JSON download of %s: %d %s", runID, st, body)
	}
	return string(body)
}

// untrustedView is what a review says of an untrusted run.
type untrustedView struct {
	Initiator         string  `json:"initiator"`
	ReleasedFromRunID *string `json:"released_from_run_id"`
	Untrusted         *struct {
		Reason   string   `json:"reason"`
		Withheld []string `json:"withheld"`
		Release  *struct {
			RunID   string `json:"run_id"`
			ActorID string `json:"actor_id"`
		} `json:"release"`
	} `json:"untrusted"`
}

// TestAgentPlanSeesNoSecretUntilAPersonReleasesIt: an agent proposes a
// configuration that tries every way to print the workspace's secrets (a
// sensitive variable, a generic secret's environment, the run token); its
// plan_only run gets none of them, so neither its log, its plan JSON, its
// plan changes nor its review holds any in any spelling, and the review
// says what was withheld. A person releases it: the new run gets them (its
// raw plan JSON, a restricted download, holds the values; its log masks
// them), and the audit trail names the person who released it.
func TestAgentPlanSeesNoSecretUntilAPersonReleasesIt(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "agentsecrets")
	ws := s.createWorkspace(t, m, "agent-secrets", "us")
	const dbPassword, apiKey = "Db-pa55/w0rd+sensitive=value", "api/key+generic-secret=42"
	s.setVariable(t, m, ws, "db_password", dbPassword, true, false)
	s.credentialProfileWith(t, m, ws, "generic_secret", map[string]any{"environment": map[string]string{"TF_VAR_api_key": apiKey}}, func([]byte) {})

	agent := connectGoAgent(t, s, m)
	cv := agent.call(t, "upload_configuration", map[string]any{"workspace_id": ws, "files": map[string]string{"main.tf": exfiltratingConfiguration}})
	started := agent.call(t, "start_run", map[string]any{"workspace_id": ws, "configuration_version_id": cv["id"], "kind": "plan_only",
		"message": "an agent's harmless-looking proposal"})
	runID, _ := started["id"].(string)
	r := s.waitRun(t, m, runID, 3*time.Minute, status("planned_and_finished", "errored", "plan_credentials_required"))
	logs := s.logsOf(t, m, runID)
	if r.Status != "planned_and_finished" {
		t.Fatalf("agent's run: %+v\n%s", r, logs)
	}
	// The configuration ran and printed what it was given: the defaults.
	if !strings.Contains(logs, "withheld|withheld") {
		t.Fatalf("the agent's plan did not print its variables:\n%s", logs)
	}
	planJSON := s.planJSONDownload(t, m, runID)
	_, changes := call(t, s.Client, http.MethodGet, s.APIURL+"/v1/runs/"+runID+"/plan-changes", nil, m.cookie()...)
	_, review := call(t, s.Client, http.MethodGet, s.APIURL+"/v1/runs/"+runID, nil, m.cookie()...)
	for name, body := range map[string]string{"log": logs, "plan JSON": planJSON, "plan changes": string(changes), "review": string(review)} {
		if form := leaked(body, dbPassword, apiKey); form != "" {
			t.Fatalf("the agent's run's %s holds a secret (%q)", name, form)
		}
		if strings.Contains(body, "rat_") {
			t.Fatalf("the agent's run's %s holds a run token", name)
		}
	}
	var view untrustedView
	unmarshalData(t, review, &view)
	if view.Initiator != "agent" || view.Untrusted == nil || view.Untrusted.Reason != "agent" || view.Untrusted.Release != nil ||
		!slices.Contains(view.Untrusted.Withheld, "sensitive_variables") || !slices.Contains(view.Untrusted.Withheld, "state") {
		t.Fatalf("review of the agent's run: %s", review)
	}
	if !slices.Contains(r.AvailableActions, "release") {
		t.Fatalf("the person is not offered the release: %v", r.AvailableActions)
	}

	// The person releases it (an agent never can: see
	// TestAgentRunsPlanWithoutSecretsUntilAPersonReleasesThem in api/run).
	var released runView
	if st := s.apiJSON(t, http.MethodPost, "/v1/runs/"+runID+"/actions/release", nil, &released, m.mutate(uniqueKey("release"))...); st != http.StatusCreated {
		t.Fatalf("release: %d", st)
	}
	released = s.waitRun(t, m, released.ID, 3*time.Minute, status("planned_and_finished", "errored", "plan_credentials_required"))
	releasedLogs := s.logsOf(t, m, released.ID)
	if released.Status != "planned_and_finished" {
		t.Fatalf("released run: %+v\n%s", released, releasedLogs)
	}
	if !strings.Contains(s.planJSONDownload(t, m, released.ID), dbPassword+"|"+apiKey) {
		t.Fatal("the released run's plan did not get the sensitive variable and the generic secret")
	}
	if strings.Contains(releasedLogs, dbPassword) || strings.Contains(releasedLogs, apiKey) {
		t.Fatal("the released run's log holds a secret in clear")
	}
	_, review = call(t, s.Client, http.MethodGet, s.APIURL+"/v1/runs/"+released.ID, nil, m.cookie()...)
	var releasedView untrustedView
	unmarshalData(t, review, &releasedView)
	if releasedView.Initiator != "agent" || releasedView.Untrusted != nil || releasedView.ReleasedFromRunID == nil ||
		*releasedView.ReleasedFromRunID != runID {
		t.Fatalf("review of the released run: %s", review)
	}
	_, review = call(t, s.Client, http.MethodGet, s.APIURL+"/v1/runs/"+runID, nil, m.cookie()...)
	unmarshalData(t, review, &view)
	if view.Untrusted == nil || view.Untrusted.Release == nil || view.Untrusted.Release.RunID != released.ID {
		t.Fatalf("the agent's run does not name its release: %s", review)
	}

	var events []auditEvent
	if st := s.apiJSON(t, http.MethodGet, "/v1/audit-events?limit=100", nil, &events, m.cookie()...); st != http.StatusOK {
		t.Fatalf("audit events: %d", st)
	}
	var releasedBy, createdBy string
	for _, e := range events {
		switch {
		case e.Action == "run.released" && e.Target.ID == runID && e.Evidence["released_run_id"] == released.ID &&
			e.Evidence["agent_client_id"] == nil:
			releasedBy = e.Actor.Type + ":" + e.Actor.ID
		case e.Action == "run.created" && e.Target.ID == released.ID:
			createdBy = e.Actor.Type + ":" + e.Actor.ID
		}
	}
	if releasedBy == "" || releasedBy != createdBy || !strings.HasSuffix(releasedBy, ":"+view.Untrusted.Release.ActorID) {
		t.Fatalf("audit names %q as releaser and %q as the released run's creator (review: %s)", releasedBy, createdBy,
			view.Untrusted.Release.ActorID)
	}
}

// auditEvent is one /v1 audit event as the tests read it.
type auditEvent struct {
	Action string `json:"action"`
	Actor  struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	} `json:"actor"`
	Target struct {
		ID string `json:"id"`
	} `json:"target"`
	Evidence map[string]any `json:"evidence"`
}
