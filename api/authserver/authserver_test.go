package authserver_test

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/platform/clientaddr"
)

func signIn(u *apitest.Client, email, password, forwardedFor string) *apitest.Response {
	return u.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/sign-in/email",
		Body: map[string]string{"email": email, "password": password}, Header: map[string]string{"X-Forwarded-For": forwardedFor}})
}

// TestClientAddressComesFromTrustedProxiesOnly: behind a trusted proxy
// each forwarded client is throttled on its own; without one, a client that
// writes X-Forwarded-For itself is still its TCP address.
func TestClientAddressComesFromTrustedProxiesOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		trusted []string
		want    int // the right password from a second forwarded address
	}{
		{"behind a trusted proxy", []string{"127.0.0.1/32"}, http.StatusOK},
		{"no trusted proxies", nil, http.StatusTooManyRequests},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := apitest.New(t, func(s *apitest.Settings) { s.Config.TrustedProxies = tc.trusted })
			u := env.SignUp("Ada")
			c := env.Anonymous()
			for range 5 {
				signIn(c, u.Email, "wrong password here", "203.0.113.1").MustStatus(t, http.StatusUnauthorized)
			}
			limited := signIn(c, u.Email, u.Password, "203.0.113.1").MustStatus(t, http.StatusTooManyRequests)
			if limited.Code() != "RATE_LIMITED" || limited.Header.Get("Retry-After") != "1" {
				t.Fatalf("refusal %s, Retry-After %q", limited.Body, limited.Header.Get("Retry-After"))
			}
			signIn(c, u.Email, u.Password, "203.0.113.2").MustStatus(t, tc.want)
		})
	}
}

// TestDashboardVouchedAddressIsTheClient: without any trusted proxy, the
// address the dashboard vouches for (a MAC under the key derived from the
// shared AUTH_SECRET) is the client; a vouch made under another key, a
// stale one or a bare address in the header is not, and the TCP peer is.
func TestDashboardVouchedAddressIsTheClient(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.SignUp("Ada")
	c := env.Anonymous()
	key := clientaddr.VouchKey(env.Config)
	as := func(password, vouch string) *apitest.Response {
		return c.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/sign-in/email",
			Body: map[string]string{"email": u.Email, "password": password}, Header: map[string]string{clientaddr.VouchHeader: vouch}})
	}
	stranger := clientaddr.Vouch(key, netip.MustParseAddr("203.0.113.1"), time.Now())
	for range 5 {
		as("wrong password here", stranger).MustStatus(t, http.StatusUnauthorized)
	}
	as(u.Password, stranger).MustStatus(t, http.StatusTooManyRequests)
	// Claims a client can make without the key are not believed: they are
	// all the TCP peer, 127.0.0.1. Its failures slow each of them, where
	// a believed claim would be an address that never failed.
	for range 5 {
		as("wrong password here", "").MustStatus(t, http.StatusUnauthorized)
	}
	otherKey := []byte("a key of another installation, 32b")
	for _, claim := range []string{
		clientaddr.Vouch(otherKey, netip.MustParseAddr("203.0.113.7"), time.Now()),
		clientaddr.Vouch(key, netip.MustParseAddr("203.0.113.8"), time.Now().Add(-2*time.Minute)),
		"203.0.113.9",
	} {
		as(u.Password, claim).MustStatus(t, http.StatusTooManyRequests)
	}
	// The owner's browser, vouched for, signs in at once.
	as(u.Password, clientaddr.Vouch(key, netip.MustParseAddr("198.51.100.4"), time.Now())).MustStatus(t, http.StatusOK)
}

// TestInvitationRoutes drives the invitation flow over HTTP: the token is
// answered once, add-member no longer exists, the invitee sees the
// invitation but joins only with the token, and the inviter's list empties.
func TestInvitationRoutes(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	owner := env.WithOrganization("Owner")
	invitee := env.SignUp("Invitee")
	owner.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/organization/add-member",
		Body: map[string]string{"email": invitee.Email, "role": "writer"}}).MustStatus(t, http.StatusNotFound)

	resp := owner.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/organization/invite-member",
		Body: map[string]string{"email": invitee.Email, "role": "writer"}}).MustStatus(t, http.StatusOK)
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("invitation answer is cacheable: %q", resp.Header.Get("Cache-Control"))
	}
	var created struct {
		Invitation struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"invitation"`
		Token string `json:"token"`
	}
	resp.Data(t, &created)
	if created.Invitation.Status != "pending" || len(created.Token) < 40 {
		t.Fatalf("created %+v", created)
	}
	var listed []struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	owner.Get("/api/auth/organization/list-invitations").MustStatus(t, http.StatusOK).Data(t, &listed)
	if len(listed) != 1 || listed[0].ID != created.Invitation.ID || listed[0].Token != "" {
		t.Fatalf("inviter's list %+v", listed)
	}
	invitee.Get("/api/auth/organization/list-invitations").MustStatus(t, http.StatusForbidden)
	invitee.Get("/api/auth/organization/list-user-invitations").MustStatus(t, http.StatusOK).Data(t, &listed)
	if len(listed) != 1 || listed[0].ID != created.Invitation.ID {
		t.Fatalf("invitee's list %+v", listed)
	}
	accept := func(token string) *apitest.Response {
		return invitee.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/organization/accept-invitation",
			Body: map[string]string{"invitation_id": created.Invitation.ID, "token": token}})
	}
	accept("").MustStatus(t, http.StatusNotFound)
	// Declining needs the token too; without it the invitation stays open.
	invitee.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/organization/reject-invitation",
		Body: map[string]string{"invitation_id": created.Invitation.ID}}).MustStatus(t, http.StatusNotFound)
	invitee.Get("/v1/workspaces").MustStatus(t, http.StatusForbidden)
	var joined struct {
		Organization struct {
			ID   string `json:"id"`
			Role string `json:"role"`
		} `json:"organization"`
	}
	accept(created.Token).MustStatus(t, http.StatusOK).Data(t, &joined)
	if joined.Organization.ID != owner.OrganizationID || joined.Organization.Role != "writer" {
		t.Fatalf("joined %+v", joined)
	}
	if code := accept(created.Token).MustStatus(t, http.StatusConflict).Code(); code != "INVITATION_NOT_PENDING" {
		t.Fatalf("second accept code %s", code)
	}
	invitee.Get("/v1/workspaces").MustStatus(t, http.StatusOK)
	owner.Get("/api/auth/organization/list-invitations").MustStatus(t, http.StatusOK).Data(t, &listed)
	if len(listed) != 0 {
		t.Fatalf("accepted invitation still listed: %+v", listed)
	}
}

// TestBodiesMustBeDeclaredJSON: a page of another site can post text/plain,
// form or multipart bodies with the browser's cookies and no preflight; the
// identity server refuses every body not declared as JSON, before reading
// it, so such a post can neither sign anyone up nor act for a session.
func TestBodiesMustBeDeclaredJSON(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	c := env.Anonymous()
	body := `{"email":"mallory@example.com","password":"correct horse battery staple","name":"M"}`
	for _, contentType := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""} {
		resp := c.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/sign-up/email", Body: []byte(body),
			Header: map[string]string{"Content-Type": contentType}})
		// fasthttp refuses a malformed multipart body itself, before any
		// handler: 400, still with a request ID.
		if resp.Status != http.StatusUnsupportedMediaType && !(strings.HasPrefix(contentType, "multipart/") && resp.Status == http.StatusBadRequest) {
			t.Errorf("sign-up as %q = %d %s", contentType, resp.Status, resp.Body)
		}
		if resp.Header.Get("X-Request-Id") == "" || !strings.Contains(string(resp.Body), `"request_id":"req_`) {
			t.Errorf("sign-up as %q answered without a request ID: %s", contentType, resp.Body)
		}
	}
	var accounts int
	if err := env.DB.Get(&accounts, `SELECT count(*) FROM users WHERE email = 'mallory@example.com'`); err != nil {
		t.Fatal(err)
	}
	if accounts != 0 {
		t.Fatal("a body not declared as JSON created an account")
	}
	c.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/sign-up/email", Body: []byte(body),
		Header: map[string]string{"Content-Type": "application/json; charset=utf-8"}}).MustStatus(t, http.StatusOK)
}
