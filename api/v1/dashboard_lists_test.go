package v1_test

import (
	"bytes"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/apitest"
)

// TestTokenListsShowOnlyWhatTheCallerMayManage: a member lists only their
// own user tokens in the active organization; service accounts, and an
// account's tokens on its read, are shown to service_account:manage
// holders only; no answer carries a plaintext; another organization's
// account is missing.
func TestTokenListsShowOnlyWhatTheCallerMayManage(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	owner := env.WithOrganization("Owner")
	other := env.WithOrganization("Other")
	reader := env.SignUp("Reader")
	env.Join(owner, reader, "reader")

	var mine struct{ ID, Token string }
	owner.Mutate(http.MethodPost, "/v1/user-tokens", map[string]string{"description": "laptop"}).MustStatus(t, http.StatusCreated).Data(t, &mine)
	reader.Mutate(http.MethodPost, "/v1/user-tokens", map[string]string{"description": "reader's"}).MustStatus(t, http.StatusCreated)
	var tokens []struct {
		ID          string  `json:"id"`
		Description string  `json:"description"`
		Token       *string `json:"token"`
	}
	owner.Get("/v1/user-tokens").MustStatus(t, http.StatusOK).Data(t, &tokens)
	if len(tokens) != 1 || tokens[0].ID != mine.ID || tokens[0].Token != nil {
		t.Fatalf("owner's token list: %+v", tokens)
	}

	var sa struct{ ID string }
	owner.Mutate(http.MethodPost, "/v1/service-accounts", map[string]string{"name": "ci"}).MustStatus(t, http.StatusCreated).Data(t, &sa)
	var issued struct{ ID, Token string }
	owner.Mutate(http.MethodPost, "/v1/service-accounts/"+sa.ID+"/tokens", map[string]any{
		"permissions": []string{"workspace:read"}, "expires_at": time.Now().Add(time.Hour)}).MustStatus(t, http.StatusCreated).Data(t, &issued)
	var accounts []struct{ ID, Name string }
	owner.Get("/v1/service-accounts").MustStatus(t, http.StatusOK).Data(t, &accounts)
	if len(accounts) != 1 || accounts[0].ID != sa.ID {
		t.Fatalf("service accounts: %+v", accounts)
	}
	resp := owner.Get("/v1/service-accounts/"+sa.ID).MustStatus(t, http.StatusOK)
	var account struct{ Tokens []map[string]any }
	resp.Data(t, &account)
	if len(account.Tokens) != 1 || account.Tokens[0]["id"] != issued.ID || account.Tokens[0]["token"] != nil {
		t.Fatalf("service account tokens: %v", account.Tokens)
	}
	if issued.Token == "" || bytes.Contains(resp.Body, []byte(issued.Token)) {
		t.Fatal("the account read answers the plaintext")
	}
	reader.Get("/v1/service-accounts").MustStatus(t, http.StatusForbidden)
	reader.Get("/v1/service-accounts/"+sa.ID).MustStatus(t, http.StatusForbidden)
	other.Get("/v1/service-accounts/"+sa.ID).MustStatus(t, http.StatusNotFound)
	other.Get("/v1/service-accounts").MustStatus(t, http.StatusOK).Data(t, &accounts)
	if len(accounts) != 0 {
		t.Fatalf("another organization lists %+v", accounts)
	}
}

// TestAuditFiltersAreBoundIntoTheCursor: type and actor filters narrow the
// list, and a cursor from one filtered list is refused by another.
func TestAuditFiltersAreBoundIntoTheCursor(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	owner := env.WithOrganization("Auditor")
	admin := env.SignUp("Admin")
	env.Join(owner, admin, "admin")
	for range 3 {
		owner.Mutate(http.MethodPost, "/v1/user-tokens", map[string]string{}).MustStatus(t, http.StatusCreated)
	}
	admin.Mutate(http.MethodPost, "/v1/user-tokens", map[string]string{}).MustStatus(t, http.StatusCreated)
	owner.Mutate(http.MethodPost, "/v1/service-accounts", map[string]string{"name": "ci"}).MustStatus(t, http.StatusCreated)

	list := func(query url.Values) page {
		var p page
		owner.Get("/v1/audit-events?"+query.Encode()).MustStatus(t, http.StatusOK).JSON(t, &p)
		return p
	}
	if p := list(url.Values{"action": {"user_token.created"}}); len(p.Data) != 4 {
		t.Fatalf("%d user_token.created events, want 4", len(p.Data))
	}
	if p := list(url.Values{"action": {"user_token.created"}, "actor_id": {admin.ID}}); len(p.Data) != 1 {
		t.Fatalf("%d events by the admin, want 1", len(p.Data))
	}
	if p := list(url.Values{"actor_id": {"usr_nobody"}}); len(p.Data) != 0 {
		t.Fatalf("%d events by nobody", len(p.Data))
	}
	first := list(url.Values{"action": {"user_token.created"}, "limit": {"2"}})
	if len(first.Data) != 2 || first.Meta.Page.NextCursor == nil {
		t.Fatalf("first filtered page: %+v", first)
	}
	next := list(url.Values{"action": {"user_token.created"}, "limit": {"2"}, "cursor": {*first.Meta.Page.NextCursor}})
	if len(next.Data) != 2 || next.Data[0].ID == first.Data[0].ID {
		t.Fatalf("second filtered page: %+v", next)
	}
	// The same cursor under another filter is refused.
	resp := owner.Get("/v1/audit-events?" + url.Values{"action": {"service_account.created"}, "limit": {"2"}, "cursor": {*first.Meta.Page.NextCursor}}.Encode())
	if resp.Status != http.StatusBadRequest || resp.Code() != "AUDIT_EVENT_LIST_CURSOR_INVALID" {
		t.Fatalf("a cursor reused under another filter: %d %s", resp.Status, resp.Body)
	}
	owner.Get("/v1/audit-events?action="+url.QueryEscape("user_token.created' OR 1=1")).MustStatus(t, http.StatusBadRequest)
}
