package identity_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/assembly/domain"
	"github.com/cairnhq/cairn/api/authcache"
	"github.com/cairnhq/cairn/api/identity"
	"github.com/cairnhq/cairn/api/platform/dbtest"
	"github.com/cairnhq/cairn/api/platform/fault"
)

// TestCachedSessionsFollowEveryChange: with cairn-api's principal cache,
// a session presented again is served from memory, and yet a sign-out in
// this process is refused on the very next request, and a change another
// process commits (a ban, a session leaving its organization) is seen as
// soon as its notification arrives.
func TestCachedSessionsFollowEveryChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, url := dbtest.NewURL(t)
	svc, err := identity.NewService(conn, domain.IdentityOptions(apitest.TestConfig()))
	if err != nil {
		t.Fatal(err)
	}
	cache := authcache.New(url, conn, slog.Default())
	t.Cleanup(func() { _ = cache.Close() })
	svc.CachePrincipals(cache)
	other, err := sqlx.Open("postgres", url) // another process's writes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })

	signIn := func(email string) (string, access.Principal) {
		t.Helper()
		in, err := svc.SignUp(ctx, email, password, "Cached", addrA)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.CreateOrganization(ctx, in.Token, "Cached "+email, "cached-"+in.User.ID[len(in.User.ID)-8:]); err != nil {
			t.Fatal(err)
		}
		p, err := svc.AuthenticateSession(ctx, in.Token)
		if err != nil {
			t.Fatal(err)
		}
		return in.Token, p
	}
	refused := func(what, token string, want error) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			_, err := svc.AuthenticateSession(ctx, token)
			if errors.Is(err, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the session still authenticates (%v)", what, err)
			}
			time.Sleep(time.Millisecond)
		}
	}
	for !cache.Live() {
		time.Sleep(5 * time.Millisecond)
	}

	token, _ := signIn("signed-out@example.com")
	if err := svc.SignOut(ctx, token); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.AuthenticateSession(ctx, token); !errors.Is(err, fault.ErrUnauthenticated) {
		t.Fatalf("the request after a sign-out in this process: %v, want unauthenticated at once", err)
	}

	banned, p := signIn("banned@example.com")
	if _, err := other.Exec(`UPDATE users SET banned_at = now() WHERE id = $1`, p.ID); err != nil {
		t.Fatal(err)
	}
	refused("a ban committed elsewhere", banned, fault.ErrUnauthenticated)

	moved, p := signIn("moved@example.com")
	if _, err := other.Exec(`UPDATE sessions SET active_organization_id = NULL WHERE user_id = $1`, p.ID); err != nil {
		t.Fatal(err)
	}
	refused("a session left its organization elsewhere", moved, identity.ErrNoActiveOrganization)
}
