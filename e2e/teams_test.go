package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// teamMember is an account whose only organization is owner's, joined by
// invitation with the member role (it reaches only what its teams grant),
// with a user API token issued in that organization.
func (s *Stack) teamMember(t *testing.T, owner member, name string) member {
	t.Helper()
	m := s.onlyMemberOf(t, owner, name, "member")
	var tok struct{ Token string }
	if st := s.apiJSON(t, http.MethodPost, "/v1/user-tokens", map[string]string{"description": "tofu"}, &tok,
		m.mutate(uniqueKey("token"))...); st != http.StatusCreated {
		t.Fatalf("%s's user token: %d", name, st)
	}
	m.token = tok.Token
	return m
}

// tfe sends a JSON:API request to /api/v2 with m's user token.
func (s *Stack) tfe(t *testing.T, m member, method, path string, body any) (int, []byte) {
	t.Helper()
	var raw []byte
	if body != nil {
		raw = mustJSON(body)
	}
	return call(t, s.Client, method, s.APIURL+"/api/v2"+path, raw, "Authorization", "Bearer "+m.token,
		"Content-Type", "application/vnd.api+json")
}

// tfeID sends a JSON:API request that must answer want and returns the
// answer's data.id.
func (s *Stack) tfeID(t *testing.T, m member, want int, method, path string, body any) string {
	t.Helper()
	st, answer := s.tfe(t, m, method, path, body)
	if st != want {
		t.Fatalf("%s /api/v2%s: %d %s", method, path, st, answer)
	}
	var doc struct{ Data struct{ ID string } }
	_ = json.Unmarshal(answer, &doc)
	return doc.Data.ID
}

// username is m's /api/v2 username (its user ID), as go-tfe reads it.
func (s *Stack) username(t *testing.T, m member) string {
	t.Helper()
	st, body := s.tfe(t, m, http.MethodGet, "/account/details", nil)
	var doc struct {
		Data struct {
			Attributes struct{ Username string } `json:"attributes"`
		} `json:"data"`
	}
	if st != http.StatusOK || json.Unmarshal(body, &doc) != nil || doc.Data.Attributes.Username == "" {
		t.Fatalf("account details: %d %s", st, body)
	}
	return doc.Data.Attributes.Username
}

// createTeam creates a team through /api/v2 with owner's token.
func (s *Stack) createTeam(t *testing.T, owner member, name string) string {
	t.Helper()
	return s.tfeID(t, owner, http.StatusCreated, http.MethodPost, "/organizations/"+owner.slug+"/teams",
		map[string]any{"data": map[string]any{"type": "teams", "attributes": map[string]any{"name": name}}})
}

// teamUsers adds (or removes) a user to (or from) a team by username.
func (s *Stack) teamUsers(t *testing.T, owner member, teamID, username string, add bool) {
	t.Helper()
	method := http.MethodPost
	if !add {
		method = http.MethodDelete
	}
	if st, body := s.tfe(t, owner, method, "/teams/"+teamID+"/relationships/users",
		map[string]any{"data": []map[string]string{{"type": "users", "id": username}}}); st != http.StatusNoContent {
		t.Fatalf("%s team member: %d %s", method, st, body)
	}
}

// grantWorkspace gives a team access to a workspace (team-workspaces
// attributes: a fixed access level or custom ones).
func (s *Stack) grantWorkspace(t *testing.T, owner member, teamID, workspaceID string, attributes map[string]any) {
	t.Helper()
	s.tfeID(t, owner, http.StatusCreated, http.MethodPost, "/team-workspaces", map[string]any{"data": map[string]any{
		"type": "team-workspaces", "attributes": attributes,
		"relationships": map[string]any{
			"team":      map[string]any{"data": map[string]string{"type": "teams", "id": teamID}},
			"workspace": map[string]any{"data": map[string]string{"type": "workspaces", "id": workspaceID}},
		}}})
}

// remoteWorkspace creates a workspace that runs the CLI's operations in
// Cairn and returns its ID and its name for the cloud block.
func (s *Stack) remoteWorkspace(t *testing.T, owner member, name string) (id, cloudName string) {
	t.Helper()
	id = s.createWorkspace(t, owner, name, "us")
	var w struct {
		CloudName string `json:"cloud_name"`
	}
	if st := s.apiJSON(t, http.MethodGet, "/v1/workspaces/"+id, nil, &w, owner.cookie()...); st != http.StatusOK {
		t.Fatalf("workspace %s: %d", name, st)
	}
	if st, body := s.tfe(t, owner, http.MethodPatch, "/workspaces/"+id,
		map[string]any{"data": map[string]any{"type": "workspaces", "attributes": map[string]any{"execution-mode": "remote"}}}); st != http.StatusOK {
		t.Fatalf("remote execution for %s: %d %s", name, st, body)
	}
	return id, w.CloudName
}

// requestIDs are the per-request parts of an answer.
var requestIDs = regexp.MustCompile(`(req|request)[_-][A-Za-z0-9_-]+|"request_id":\s*"[^"]*"`)

// sameAnswer fails unless two answers (one about something that exists
// but is out of reach, one about nothing at all) are the same not-found,
// up to request IDs.
func sameAnswer(t *testing.T, what string, status int, body []byte, missingStatus int, missingBody []byte) {
	t.Helper()
	got, want := requestIDs.ReplaceAllString(string(body), "<id>"), requestIDs.ReplaceAllString(string(missingBody), "<id>")
	if status != http.StatusNotFound || status != missingStatus || got != want {
		t.Errorf("%s: %d %s\nwhile a missing one answers %d %s", what, status, body, missingStatus, missingBody)
	}
}

// dashboardPage reads a dashboard page and returns its status and its
// main content, request IDs masked.
func dashboardPage(t *testing.T, d dashboardSession, path string) (int, []byte) {
	t.Helper()
	resp := d.get(t, path, nil)
	body, _ := io.ReadAll(resp.Body)
	main := regexp.MustCompile(`(?s)<main.*</main>`).Find(body)
	return resp.StatusCode, requestIDs.ReplaceAll(main, []byte("<id>"))
}

// withCSRF gives a dashboard session signed in through the consent screen
// its CSRF token, for the dashboard's forms.
func withCSRF(t *testing.T, d dashboardSession) dashboardSession {
	t.Helper()
	meta := regexp.MustCompile(`name="csrf-token" content="([0-9a-f]+)"`).FindStringSubmatch(d.page(t, "/organizations"))
	if meta == nil {
		t.Fatal("no CSRF token on the organizations page")
	}
	d.csrf = meta[1]
	return d
}

// missingID is an ID shaped like id that names nothing.
func missingID(id string) string {
	prefix, _, _ := strings.Cut(id, "_")
	return prefix + "_" + strings.Repeat("0", len(id)-len(prefix)-1)
}

// toolError calls a tool that must fail and returns what the agent sees.
func (a *goAgent) toolError(t *testing.T, name string, args map[string]any) string {
	t.Helper()
	res, err := a.session.CallTool(a.ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if !res.IsError {
		t.Errorf("%s succeeded, want a refusal: %s", name, text.String())
	}
	return text.String()
}

// list calls a list tool and returns its items.
func (a *goAgent) list(t *testing.T, name string, args map[string]any) []any {
	t.Helper()
	res, err := a.session.CallTool(a.ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("%s: %v %+v", name, err, res)
	}
	var out struct {
		Data []any `json:"data"`
	}
	_ = json.Unmarshal(mustJSON(res.StructuredContent), &out)
	return out.Data
}

// workspaceIDs lists the IDs a /v1 workspace list answered.
func workspaceIDs(list []map[string]any) []string {
	ids := make([]string, 0, len(list))
	for _, w := range list {
		id, _ := w["id"].(string)
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

const teamConfig = `terraform {
  cloud {
    hostname     = %q
    organization = %q
    workspaces {
      name = %q
    }
  }
}

resource "terraform_data" "item" {
  input = "from-a-team"
}

output "item" {
  value = terraform_data.item.output
}
`

// teamTofuDir is a working directory whose cloud block selects workspace
// cloudName with m's token.
func teamTofuDir(t *testing.T, s *Stack, m member, cloudName string) tofuRun {
	t.Helper()
	tf := newTofuDir(t, s, m)
	if err := os.WriteFile(filepath.Join(tf.dir, "main.tf"), []byte(fmt.Sprintf(teamConfig, s.APIHost, m.slug, cloudName)), 0o644); err != nil {
		t.Fatal(err)
	}
	return tf
}

// TestTeamAccessWithTheTofuCLI: Bob, a member whose only access is his
// team's plan grant on workspace A, runs a speculative plan there with the
// real CLI and his user token, is refused approval (on /v1, on /api/v2 and
// by `tofu apply`, at once), and finds workspace B exactly as missing as a
// workspace that does not exist on /v1, /api/v2, the dashboard and the
// agent tools. A second team's write grant on B lets the same token apply
// there, approved by the same session; leaving that team makes B missing
// again on the very next request.
func TestTeamAccessWithTheTofuCLI(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	alice := s.newMember(t, "alice")
	a, aName := s.remoteWorkspace(t, alice, "team-alpha")
	b, bName := s.remoteWorkspace(t, alice, "team-beta")
	bob := s.teamMember(t, alice, "bob")
	bobUser := s.username(t, bob)
	payments := s.createTeam(t, alice, "payments")
	s.teamUsers(t, alice, payments, bobUser, true)
	s.grantWorkspace(t, alice, payments, a, map[string]any{"access": "plan"})

	// A speculative plan in A with Bob's token.
	tfA := teamTofuDir(t, s, bob, aName)
	tfA.run(t, "init")
	if out := tfA.run(t, "plan"); !strings.Contains(out, "Plan: 1 to add, 0 to change, 0 to destroy.") {
		t.Fatalf("Bob's plan in A:\n%s", out)
	}
	spec := s.newestRun(t, alice, a, 10*time.Second, status("planned_and_finished"))
	if spec.Kind != "speculative" {
		t.Fatalf("Bob's plan made a %s run", spec.Kind)
	}

	// Approving in A is refused: Alice's run waits for an approval Bob may
	// not give, on /v1 (his session) or /api/v2 (his token).
	cfg := s.uploadConfiguration(t, alice, a, map[string]string{"main.tf": `resource "terraform_data" "owner" { input = "alice" }`})
	_, waiting := s.createRun(t, alice, a, cfg, "plan_and_apply")
	waiting = s.waitRun(t, alice, waiting.ID, 2*time.Minute, status("awaiting_approval"))
	if st, body := call(t, s.Client, http.MethodPost, s.APIURL+"/v1/runs/"+waiting.ID+"/actions/approve", mustJSON(waiting.binding()),
		bob.mutate(uniqueKey("approve"))...); st != http.StatusForbidden {
		t.Errorf("Bob approving in A on /v1: %d %s", st, body)
	}
	if st, body := s.tfe(t, bob, http.MethodPost, "/runs/"+waiting.ID+"/actions/apply", map[string]string{"comment": "bob"}); st != http.StatusForbidden {
		t.Errorf("Bob applying in A on /api/v2: %d %s", st, body)
	}
	// `tofu apply` stops on the workspace's permissions before it queues
	// anything: a permission error, not a wait for an approval.
	applyA := tfA.interactive().start(t, "apply")
	_ = applyA.wait(t, 2*time.Minute)
	if out := applyA.out.String(); !strings.Contains(out, "Insufficient rights to apply changes") {
		t.Errorf("Bob's tofu apply in A:\n%s", out)
	}
	if r := s.newestRun(t, alice, a, 10*time.Second, func(runView) bool { return true }); r.ID != waiting.ID {
		t.Errorf("Bob's refused apply queued run %s", r.ID)
	}

	// B is as missing as nothing at all, on every surface.
	agent := connectGoAgent(t, s, bob)
	dash := agent.dashboard
	checkBMissing := func(when string) {
		t.Helper()
		st, body := call(t, s.Client, http.MethodGet, s.APIURL+"/v1/workspaces/"+b, nil, bob.cookie()...)
		mst, mbody := call(t, s.Client, http.MethodGet, s.APIURL+"/v1/workspaces/"+missingID(b), nil, bob.cookie()...)
		sameAnswer(t, when+": /v1 workspace B", st, body, mst, mbody)
		var list []map[string]any
		if st := s.apiJSON(t, http.MethodGet, "/v1/workspaces", nil, &list, bob.cookie()...); st != http.StatusOK ||
			!slices.Equal(workspaceIDs(list), []string{a}) {
			t.Errorf("%s: Bob's /v1 workspace list %d %v, want only A %s", when, st, workspaceIDs(list), a)
		}
		st, body = s.tfe(t, bob, http.MethodGet, "/organizations/"+alice.slug+"/workspaces/"+bName, nil)
		mst, mbody = s.tfe(t, bob, http.MethodGet, "/organizations/"+alice.slug+"/workspaces/no-such-workspace", nil)
		sameAnswer(t, when+": /api/v2 workspace B by name", st, body, mst, mbody)
		st, body = s.tfe(t, bob, http.MethodGet, "/workspaces/"+b, nil)
		mst, mbody = s.tfe(t, bob, http.MethodGet, "/workspaces/"+missingID(b), nil)
		sameAnswer(t, when+": /api/v2 workspace B by ID", st, body, mst, mbody)

		// The dashboard's workspace pages probe launch access first, and
		// an unresolved probe is the non-disclosing 503 (SPEC §1 rules 6
		// and 11): its not-found.
		st, body = dashboardPage(t, dash, "/workspaces/"+b)
		mst, mbody = dashboardPage(t, dash, "/workspaces/"+missingID(b))
		if st != http.StatusServiceUnavailable || st != mst || !bytes.Equal(body, mbody) || strings.Contains(string(body), bName) {
			t.Errorf("%s: the dashboard page of B answers %d\n%s\nwhile a missing one answers %d\n%s", when, st, body, mst, mbody)
		}

		got := agent.toolError(t, "get_workspace", map[string]any{"id": b})
		missing := agent.toolError(t, "get_workspace", map[string]any{"id": missingID(b)})
		if requestIDs.ReplaceAllString(got, "<id>") != requestIDs.ReplaceAllString(missing, "<id>") || !strings.Contains(got, "404") {
			t.Errorf("%s: the agent's get_workspace of B says %q, of a missing one %q", when, got, missing)
		}
		listed := agent.list(t, "list_workspaces", map[string]any{})
		if raw := string(mustJSON(listed)); len(listed) != 1 || !strings.Contains(raw, a) || strings.Contains(raw, b) {
			t.Errorf("%s: the agent lists %s, want only A", when, raw)
		}
	}
	if st, page := dashboardPage(t, dash, "/workspaces/"+a); st != http.StatusOK || !bytes.Contains(page, []byte("team-alpha")) {
		t.Errorf("the dashboard page of A for Bob: %d\n%s", st, page)
	}
	agent.call(t, "get_workspace", map[string]any{"id": a})
	checkBMissing("with plan on A only")

	// A second team with write on B widens the same token and session on
	// their next request: Bob applies in B with the CLI and approves on
	// /v1.
	platform := s.createTeam(t, alice, "platform")
	s.grantWorkspace(t, alice, platform, b, map[string]any{"access": "write"})
	s.teamUsers(t, alice, platform, bobUser, true)
	tfB := teamTofuDir(t, s, bob, bName)
	tfB.run(t, "init")
	applyB := tfB.interactive().start(t, "apply")
	waitingB := s.newestRun(t, bob, b, 2*time.Minute, status("awaiting_approval"))
	waitForOutput(t, applyB, "Enter a value:")
	if st, body := call(t, s.Client, http.MethodPost, s.APIURL+"/v1/runs/"+waitingB.ID+"/actions/approve", mustJSON(waitingB.binding()),
		bob.mutate(uniqueKey("approve"))...); st != http.StatusOK {
		t.Fatalf("Bob approving in B: %d %s", st, body)
	}
	if err := applyB.wait(t, 3*time.Minute); err != nil || !strings.Contains(applyB.out.String(), "Apply complete! Resources: 1 added") {
		t.Fatalf("Bob's apply in B (%v):\n%s", err, applyB.out.String())
	}
	s.waitRun(t, bob, waitingB.ID, 30*time.Second, status("applied"))

	// Leaving the team narrows the token, the session, the dashboard and
	// the agent on the very next request.
	s.teamUsers(t, alice, platform, bobUser, false)
	checkBMissing("after leaving platform")
}
