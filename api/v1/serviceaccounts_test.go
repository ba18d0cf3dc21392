package v1_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/serviceaccount"
)

// serviceAccountFixture is an organization's admin with a project, a
// workspace in it and a service account named deployer.
func serviceAccountFixture(t *testing.T) (env *apitest.Env, admin *apitest.User, projectID string, w ws, accountID string) {
	t.Helper()
	env = apitest.New(t)
	admin = env.WithOrganization("Admin")
	projectID = newProject(t, admin, "P")
	w = newWorkspace(t, admin, projectID, "w")
	var sa struct{ ID string }
	admin.Mutate(http.MethodPost, "/v1/service-accounts", map[string]string{"name": "deployer"}).MustStatus(t, http.StatusCreated).Data(t, &sa)
	return env, admin, projectID, w, sa.ID
}

// TestServiceAccountTokensHaveNoListOperation: no operation lists
// service-account tokens (SPEC §2), in the contract or on the wire; the
// account's own read shows its managers each token's ID, permissions,
// boundary, expiry and revocation (live ones first, bounded, with a
// truncation flag), never a plaintext, and revocation by ID still works.
func TestServiceAccountTokensHaveNoListOperation(t *testing.T) {
	t.Parallel()
	env, admin, proj, w, sa := serviceAccountFixture(t)
	tokens := "/v1/service-accounts/" + sa + "/tokens"

	// Nothing answers a token list: not the old route, not the contract.
	if resp := admin.Get(tokens); resp.Status != http.StatusMethodNotAllowed && resp.Status != http.StatusNotFound {
		t.Fatalf("GET %s: %d %s", tokens, resp.Status, resp.Body)
	}
	var contract struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	env.Anonymous().Get("/v1/openapi.json").MustStatus(t, http.StatusOK).JSON(t, &contract)
	for path, ops := range contract.Paths {
		if _, ok := ops["get"]; ok && path == "/v1/service-accounts/{id}/tokens" {
			t.Fatalf("the contract lists tokens at GET %s", path)
		}
	}

	issue := func(body map[string]any) struct{ ID, Token string } {
		t.Helper()
		var out struct{ ID, Token string }
		admin.Mutate(http.MethodPost, tokens, body).MustStatus(t, http.StatusCreated).Data(t, &out)
		return out
	}
	bounded := issue(map[string]any{"permissions": []string{"state:read"}, "workspace_id": w.ID, "expires_at": time.Now().Add(24 * time.Hour)})
	revoked := issue(map[string]any{"permissions": []string{"run:read"}, "expires_at": time.Now().Add(time.Hour)})
	expired := issue(map[string]any{"permissions": []string{"run:read"}, "expires_at": time.Now().Add(time.Hour)})
	live := issue(map[string]any{"permissions": []string{"workspace:read"}, "project_id": proj, "expires_at": time.Now().Add(time.Hour)})
	admin.Mutate(http.MethodDelete, tokens+"/"+revoked.ID, nil).MustStatus(t, http.StatusOK)
	if _, err := env.DB.Exec(`UPDATE service_account_tokens SET expires_at = now() - interval '1 minute' WHERE id = $1`, expired.ID); err != nil {
		t.Fatal(err)
	}

	type tokenView struct {
		ID          string     `json:"id"`
		Permissions []string   `json:"permissions"`
		ProjectID   *string    `json:"project_id"`
		WorkspaceID *string    `json:"workspace_id"`
		ExpiresAt   time.Time  `json:"expires_at"`
		RevokedAt   *time.Time `json:"revoked_at"`
		Token       *string    `json:"token"`
	}
	var account struct {
		ID              string      `json:"id"`
		Name            string      `json:"name"`
		Tokens          []tokenView `json:"tokens"`
		TokensTruncated bool        `json:"tokens_truncated"`
	}
	resp := admin.Get("/v1/service-accounts/"+sa).MustStatus(t, http.StatusOK)
	resp.Data(t, &account)
	var order []string
	for _, tok := range account.Tokens {
		order = append(order, tok.ID)
		if tok.Token != nil {
			t.Fatalf("token %s answered with a plaintext", tok.ID)
		}
	}
	// Live tokens first (newest first), then the revoked and expired ones.
	want := []string{live.ID, bounded.ID, expired.ID, revoked.ID}
	if account.ID != sa || account.Name != "deployer" || account.TokensTruncated || len(order) != len(want) {
		t.Fatalf("account read: %+v", account)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("tokens in order %v, want %v", order, want)
		}
	}
	first, second := account.Tokens[0], account.Tokens[1]
	if first.ProjectID == nil || *first.ProjectID != proj || first.WorkspaceID != nil || first.Permissions[0] != "workspace:read" {
		t.Fatalf("project-bounded token: %+v", first)
	}
	if second.WorkspaceID == nil || *second.WorkspaceID != w.ID || second.RevokedAt != nil || second.ExpiresAt.Before(time.Now()) {
		t.Fatalf("workspace-bounded token: %+v", second)
	}
	if account.Tokens[3].RevokedAt == nil {
		t.Fatalf("the revoked token reads as live: %+v", account.Tokens[3])
	}
	for _, plaintext := range []string{live.Token, bounded.Token, revoked.Token, expired.Token} {
		if bytes.Contains(resp.Body, []byte(plaintext)) {
			t.Fatal("the account read carries a token plaintext")
		}
	}

	// Revocation by ID from the read still works, at once.
	admin.Mutate(http.MethodDelete, tokens+"/"+bounded.ID, nil).MustStatus(t, http.StatusOK)
	if _, err := env.Server.V1Services().ServiceAccounts.Authenticate(context.Background(), bounded.Token); err == nil {
		t.Fatal("the revoked token still authenticates")
	}
	admin.Get("/v1/service-accounts/"+sa).MustStatus(t, http.StatusOK).Data(t, &account)
	// It moves behind the live token, the oldest of the ones that no
	// longer work.
	if len(account.Tokens) != 4 || account.Tokens[0].ID != live.ID || account.Tokens[3].ID != bounded.ID || account.Tokens[3].RevokedAt == nil {
		t.Fatalf("after revoking: %+v", account.Tokens)
	}

	// Past the bound, the oldest revoked tokens are left out and the read
	// says so; the live one is still first.
	if _, err := env.DB.Exec(`INSERT INTO service_account_tokens
			(id, organization_id, service_account_id, token_hash, permissions, expires_at, created_by, created_at, revoked_at)
		SELECT 'sat_old' || i, organization_id, id, sha256(('old' || i)::bytea), '{run:read}', now() + interval '1 hour',
			created_by, now() - interval '1 day', now() - interval '1 hour'
		FROM service_accounts, generate_series(1, $2) AS i WHERE id = $1`, sa, serviceaccount.MaxTokensShown); err != nil {
		t.Fatal(err)
	}
	admin.Get("/v1/service-accounts/"+sa).MustStatus(t, http.StatusOK).Data(t, &account)
	if len(account.Tokens) != serviceaccount.MaxTokensShown || !account.TokensTruncated || account.Tokens[0].ID != live.ID {
		t.Fatalf("over the bound: %d tokens, truncated %v, first %s", len(account.Tokens), account.TokensTruncated, account.Tokens[0].ID)
	}
}
