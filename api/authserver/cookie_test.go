package authserver_test

import (
	"net/http"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/authserver"
)

// sessionCookie returns the session cookie a response sets, failing when
// there is not exactly one.
func sessionCookie(t *testing.T, what string, resp *apitest.Response) *http.Cookie {
	t.Helper()
	var found []*http.Cookie
	for _, line := range resp.Header.Values("Set-Cookie") {
		c, err := http.ParseSetCookie(line)
		if err != nil {
			t.Fatalf("%s: Set-Cookie %q: %v", what, line, err)
		}
		if c.Name == authserver.SessionCookie {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d session cookies in %q", what, len(found), resp.Header.Values("Set-Cookie"))
	}
	return found[0]
}

// TestSessionCookieIsHostOnly (SPEC §5 rule 5): sign-up, sign-in and
// sign-out set __Secure-identity.session_token host-only (no Domain),
// HttpOnly, Secure by default, Path / and SameSite Lax; only an operator's
// explicit CAIRN_SECURE_COOKIES=false drops Secure, and nothing else.
func TestSessionCookieIsHostOnly(t *testing.T) {
	t.Parallel()
	for _, secure := range []bool{true, false} {
		var opts []apitest.Option
		if !secure {
			opts = append(opts, func(s *apitest.Settings) { s.Config.SecureCookies = false })
		}
		env := apitest.New(t, opts...)
		u := env.SignUp("Cookie")
		c := env.Anonymous()
		in := signIn(c, u.Email, u.Password, "")
		in.MustStatus(t, http.StatusOK)
		var body struct {
			Token string `json:"token"`
		}
		in.Data(t, &body)
		c.Token = body.Token
		out := c.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/sign-out"}).MustStatus(t, http.StatusOK)
		for what, resp := range map[string]*apitest.Response{"sign-in": in, "sign-out": out} {
			ck := sessionCookie(t, what, resp)
			if ck.Domain != "" || !ck.HttpOnly || ck.Secure != secure || ck.Path != "/" || ck.SameSite != http.SameSiteLaxMode {
				t.Errorf("secure=%v %s: cookie %+v, want host-only, HttpOnly, Secure=%v, Path /, SameSite Lax", secure, what, ck, secure)
			}
			if raw := resp.Header.Get("Set-Cookie"); what == "sign-in" && ck.Value != body.Token {
				t.Errorf("%s: cookie %q does not carry the session token", what, raw)
			}
		}
	}
}
