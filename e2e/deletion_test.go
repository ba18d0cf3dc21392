package e2e

import (
	"database/sql"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/github/githubfake"
)

// TestDeletingAWorkspaceAndItsOrganizationLeavesNothing: a workspace
// connected to a repository, with pushes ingested, a run, a credential
// profile and variables, is deleted through /api/v2 as the tofu provider
// and go-tfe do; then its organization, which also holds a code-host
// installation, an SSO provider, a SCIM token, teams and a variable set.
// Both answer 204, and afterwards no table holds a row of the organization
// except the audit trail, which is evidence and outlives it.
func TestDeletingAWorkspaceAndItsOrganizationLeavesNothing(t *testing.T) {
	t.Parallel()
	c := startCodeHost(t)
	s, m := c.Stack, c.m

	sha := c.fake.Commit(codeHostRepo, "main", "Greet from a push", map[string]string{"infra/main.tf": codeHostConfig})
	if st, body := c.deliver(t, "push", c.fake.Push(t, codeHostInstallation, codeHostRepo, githubfake.PushOptions{
		Branch: "main", Before: strings.Repeat("3", 40), After: sha, Paths: [][]string{{"infra/main.tf"}}})); st != http.StatusOK {
		t.Fatalf("push: %d %s", st, body)
	}
	r := c.newestRun(t, m, c.workspaceID, 2*time.Minute, status("awaiting_approval", "errored", "planned_and_finished"))
	if r.Status != "awaiting_approval" {
		t.Fatalf("tracked run: %+v\n%s", r, c.logsOf(t, m, r.ID))
	}
	// A run that waits for approval when its workspace goes is deleted
	// with it, as HCP's force delete does.
	if st, body := call(t, s.Client, http.MethodPost, s.APIURL+"/v1/workspaces/"+c.workspaceID+"/credential-profiles",
		mustJSON(map[string]string{"provider": "aws"}), append(m.mutate(uniqueKey("cpr")), "Content-Type", "application/json")...); st != http.StatusCreated {
		t.Fatalf("credential profile: %d %s", st, body)
	}
	if st, body := s.tfe(t, m, http.MethodPost, "/workspaces/"+c.workspaceID+"/vars", map[string]any{"data": map[string]any{
		"type": "vars", "attributes": map[string]any{"key": "region", "value": "eu-west-1", "category": "terraform"}}}); st != http.StatusCreated {
		t.Fatalf("variable: %d %s", st, body)
	}
	if st := s.apiJSON(t, http.MethodPost, "/api/auth/sso/register", map[string]any{
		"type": "oidc", "issuer": "https://idp.example.org", "domains": []string{"deletion.example.org"},
		"oidcConfig": map[string]any{"clientId": "cairn", "clientSecret": "a-client-secret-of-some-length"},
	}, nil, m.cookie()...); st != http.StatusOK {
		t.Fatalf("registering an SSO provider: %d", st)
	}
	if st := s.apiJSON(t, http.MethodPost, "/api/auth/scim/generate-token", map[string]any{}, nil, m.cookie()...); st != http.StatusOK {
		t.Fatalf("SCIM token: %d", st)
	}
	s.createTeam(t, m, "platform")
	s.tfeID(t, m, http.StatusCreated, http.MethodPost, "/organizations/"+m.slug+"/varsets", map[string]any{"data": map[string]any{
		"type": "varsets", "attributes": map[string]any{"name": "shared", "global": true}}})

	if st, body := s.tfe(t, m, http.MethodDelete, "/workspaces/"+c.workspaceID, nil); st != http.StatusNoContent {
		t.Fatalf("deleting the connected workspace: %d %s", st, body)
	}
	if st, body := s.tfe(t, m, http.MethodGet, "/workspaces/"+c.workspaceID, nil); st != http.StatusNotFound {
		t.Fatalf("the deleted workspace still reads: %d %s", st, body)
	}
	if st, body := s.tfe(t, m, http.MethodDelete, "/organizations/"+m.slug, nil); st != http.StatusNoContent {
		t.Fatalf("deleting the organization: %d %s", st, body)
	}

	conn, err := sql.Open("postgres", s.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Every table with an organization column, read from the catalog, so a
	// table added later is checked without naming it here.
	rows, err := conn.Query(`SELECT table_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND column_name = 'organization_id' AND table_name <> 'audit_events'
		ORDER BY table_name`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(tables) < 20 {
		t.Fatalf("only %d tables with an organization column: %v", len(tables), tables)
	}
	var left []string
	for _, table := range tables {
		var n int
		if err := conn.QueryRow(fmt.Sprintf(`SELECT count(*) FROM %q WHERE organization_id = $1`, table), m.orgID).Scan(&n); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		if n > 0 {
			left = append(left, fmt.Sprintf("%s (%d)", table, n))
		}
	}
	if len(left) > 0 {
		t.Fatalf("rows of the deleted organization remain in: %s", strings.Join(left, ", "))
	}
	var evidence int
	if err := conn.QueryRow(`SELECT count(*) FROM audit_events WHERE organization_id = $1 AND action = 'organization.deleted'`,
		m.orgID).Scan(&evidence); err != nil || evidence != 1 {
		t.Fatalf("the deletion's audit event: %d, %v", evidence, err)
	}
}
