package identity_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/assembly/domain"
	"github.com/cairnhq/cairn/api/identity"
	"github.com/cairnhq/cairn/api/platform/dbtest"
	"github.com/cairnhq/cairn/api/platform/fault"
)

const password = "correct horse battery staple"

var (
	addrA = netip.MustParseAddr("198.51.100.1")
	addrB = netip.MustParseAddr("198.51.100.2")
)

// clock is the service's time, moved by the test instead of sleeping.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type fixture struct {
	svc   *identity.Service
	db    *sqlx.DB
	clock *clock
}

func setup(t *testing.T) fixture {
	t.Helper()
	conn := dbtest.New(t)
	c := &clock{now: time.Now()}
	opts := domain.IdentityOptions(apitest.TestConfig())
	opts.Now = c.Now
	svc, err := identity.NewService(conn, opts)
	if err != nil {
		t.Fatal(err)
	}
	return fixture{svc: svc, db: conn, clock: c}
}

// retryAfter returns the wait a rate-limited error asks for, or fails.
func retryAfter(t *testing.T, err error) time.Duration {
	t.Helper()
	var limited identity.RateLimitedError
	if !errors.As(err, &limited) || !errors.Is(err, identity.ErrRateLimited) {
		t.Fatalf("error = %v, want rate limited", err)
	}
	return limited.RetryAfter
}

func TestPasswordHashRoundTrip(t *testing.T) {
	t.Parallel()
	params := identity.PasswordParams{MemoryKiB: 64, Iterations: 1, Parallelism: 1}
	hash, err := identity.HashPassword(password, params)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(hash, "$argon2id$v=19$m=64,t=1,p=1$") {
		t.Fatalf("hash %q is not argon2id PHC", hash)
	}
	for pw, want := range map[string]bool{password: true, "correct horse battery stapl": false, "": false} {
		ok, err := identity.VerifyPassword(pw, hash)
		if err != nil || ok != want {
			t.Errorf("verify(%q) = %v, %v; want %v", pw, ok, err, want)
		}
	}
	for _, bad := range []string{"$2a$10$bcrypt", "$argon2id$v=19$m=0,t=1,p=1$c2FsdA$a2V5"} {
		if _, err := identity.VerifyPassword("x", bad); err == nil {
			t.Fatalf("hash %q accepted", bad)
		}
	}
	other, _ := identity.HashPassword(password, params)
	if other == hash {
		t.Fatal("two hashes of one password share a salt")
	}
}

func TestInputValidation(t *testing.T) {
	t.Parallel()
	for _, e := range []string{"", "no-at-sign", "Name <a@example.com>", strings.Repeat("a", 250) + "@example.com"} {
		if _, err := identity.NormalizeEmail(e); err == nil {
			t.Errorf("email %q accepted", e)
		}
	}
	if e, err := identity.NormalizeEmail("  Ada@Example.COM "); err != nil || e != "ada@example.com" {
		t.Fatalf("normalize = %q, %v", e, err)
	}
	if identity.ValidatePassword("short") == nil || identity.ValidatePassword(strings.Repeat("x", 1025)) == nil {
		t.Fatal("password bounds not enforced")
	}
	for _, slug := range []string{"", "-lead", "UPPER", "with space", strings.Repeat("a", 64)} {
		if identity.ValidateSlug(slug) == nil {
			t.Errorf("slug %q accepted", slug)
		}
	}
}

// TestFailedSignInsSlowThePairNotTheAccount is the lockout a stranger used
// to cause, tried again: guessing from one address slows only that
// address's guesses at that account, with growing waits, and answers the
// same for an e-mail without an account; the owner signs in from another
// address meanwhile.
func TestFailedSignInsSlowThePairNotTheAccount(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	if _, err := f.svc.SignUp(ctx, "known@example.com", password, "Known", addrA); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.SignUp(ctx, "KNOWN@example.com", password, "Again", addrA); !errors.Is(err, identity.ErrEmailTaken) {
		t.Fatalf("duplicate sign-up = %v", err)
	}
	for _, email := range []string{"known@example.com", "ghost@example.com"} {
		for i := range 5 {
			// Real attempts are spread out a little, so the count drains a
			// little between them.
			f.clock.Advance(10 * time.Millisecond)
			if _, err := f.svc.SignIn(ctx, email, "wrong password here", addrA); !errors.Is(err, identity.ErrInvalidCredentials) ||
				err.Error() != identity.ErrInvalidCredentials.Error() {
				t.Fatalf("%s failure %d = %v", email, i+1, err)
			}
		}
		// The sixth try must wait one second, then each failure doubles it.
		_, err := f.svc.SignIn(ctx, email, password, addrA)
		if wait := retryAfter(t, err); wait < 999*time.Millisecond || wait > time.Second {
			t.Fatalf("%s: first wait %v, want 1s", email, wait)
		}
		f.clock.Advance(time.Second)
		if _, err := f.svc.SignIn(ctx, email, "wrong password here", addrA); !errors.Is(err, identity.ErrInvalidCredentials) {
			t.Fatalf("%s after waiting = %v", email, err)
		}
		// (a little under two seconds: the count drains by one an hour)
		_, err = f.svc.SignIn(ctx, email, "wrong password here", addrA)
		if wait := retryAfter(t, err); wait < 1990*time.Millisecond || wait > 2*time.Second {
			t.Fatalf("%s: second wait %v, want 2s", email, wait)
		}
	}
	// The owner, elsewhere, is not locked out.
	if _, err := f.svc.SignIn(ctx, "known@example.com", password, addrB); err != nil {
		t.Fatalf("correct password from another address: %v", err)
	}
	// From the slowed address the right password waits too (checking it
	// would tell a guesser it was right), and then signs in and clears the
	// pair: five free tries again.
	if _, err := f.svc.SignIn(ctx, "known@example.com", password, addrA); !errors.Is(err, identity.ErrRateLimited) {
		t.Fatalf("right password while slowed = %v", err)
	}
	f.clock.Advance(2 * time.Second)
	if _, err := f.svc.SignIn(ctx, "known@example.com", password, addrA); err != nil {
		t.Fatalf("right password after the wait: %v", err)
	}
	for i := range 5 {
		if _, err := f.svc.SignIn(ctx, "known@example.com", "wrong password here", addrA); !errors.Is(err, identity.ErrInvalidCredentials) {
			t.Fatalf("failure %d after a success = %v", i+1, err)
		}
	}
	// The table names neither e-mails nor addresses.
	var leaked int
	if err := f.db.Get(&leaked, `SELECT count(*) FROM sign_in_throttles WHERE subject LIKE '%example%' OR subject LIKE '%198.51%'`); err != nil || leaked != 0 {
		t.Fatalf("throttle subjects in clear: %d, %v", leaked, err)
	}
}

// TestOneAddressGuessingManyAccountsIsSlowed: spreading guesses over many
// e-mails from one address does not escape the address's own limit, which
// drains by itself and leaves other addresses alone.
func TestOneAddressGuessingManyAccountsIsSlowed(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	if _, err := f.svc.SignUp(ctx, "victim@example.com", password, "Victim", addrB); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if _, err := f.svc.SignIn(ctx, "user"+string(rune('a'+i%26))+strings.Repeat("x", i/26)+"@example.com", "wrong password here", addrA); !errors.Is(err, identity.ErrInvalidCredentials) {
			t.Fatalf("failure %d = %v", i+1, err)
		}
	}
	_, err := f.svc.SignIn(ctx, "victim@example.com", password, addrA)
	if wait := retryAfter(t, err); wait != time.Second {
		t.Fatalf("address wait %v", wait)
	}
	if _, err := f.svc.SignIn(ctx, "victim@example.com", password, addrB); err != nil {
		t.Fatalf("another address: %v", err)
	}
	f.clock.Advance(time.Second)
	if _, err := f.svc.SignIn(ctx, "victim@example.com", password, addrA); err != nil {
		t.Fatalf("after the wait: %v", err)
	}
}

// TestParallelGuessesAreCountedBeforeTheyAreChecked: a burst of guesses at
// one pair cannot all slip through before the first failure is recorded.
func TestParallelGuessesAreCountedBeforeTheyAreChecked(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	if _, err := f.svc.SignUp(ctx, "target@example.com", password, "Target", addrB); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var checked, limited int
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			_, err := f.svc.SignIn(ctx, "target@example.com", "wrong password here", addrA)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, identity.ErrInvalidCredentials):
				checked++
			case errors.Is(err, identity.ErrRateLimited):
				limited++
			default:
				t.Errorf("guess = %v", err)
			}
		})
	}
	wg.Wait()
	if checked != 5 || limited != 15 {
		t.Fatalf("%d guesses checked, %d refused; want 5 and 15", checked, limited)
	}
}

func TestSignUpsAreLimitedPerAddress(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	// Invalid input is refused before it costs a hash and does not count.
	for range 30 {
		if _, err := f.svc.SignUp(ctx, "not-an-email", password, "X", addrA); !errors.Is(err, identity.ErrInvalidInput) {
			t.Fatalf("invalid sign-up = %v", err)
		}
	}
	for i := range 20 {
		if _, err := f.svc.SignUp(ctx, "new"+strings.Repeat("x", i)+"@example.com", password, "New", addrA); err != nil {
			t.Fatalf("sign-up %d: %v", i+1, err)
		}
	}
	_, err := f.svc.SignUp(ctx, "one-more@example.com", password, "New", addrA)
	if wait := retryAfter(t, err); wait != time.Second {
		t.Fatalf("sign-up wait %v", wait)
	}
	if _, err := f.svc.SignUp(ctx, "elsewhere@example.com", password, "New", addrB); err != nil {
		t.Fatalf("sign-up from another address: %v", err)
	}
	// IPv6 neighbours in one /64 share a limit; mapped IPv4 is IPv4.
	v6 := netip.MustParseAddr("2001:db8:1:2::1")
	for i := range 20 {
		if _, err := f.svc.SignUp(ctx, "v6-"+strings.Repeat("y", i)+"@example.com", password, "V6", v6); err != nil {
			t.Fatalf("v6 sign-up %d: %v", i+1, err)
		}
	}
	if _, err := f.svc.SignUp(ctx, "v6-next@example.com", password, "V6", netip.MustParseAddr("2001:db8:1:2::ffff")); !errors.Is(err, identity.ErrRateLimited) {
		t.Fatalf("same /64 = %v", err)
	}
	if _, err := f.svc.SignUp(ctx, "mapped@example.com", password, "M", netip.MustParseAddr("::ffff:198.51.100.1")); !errors.Is(err, identity.ErrRateLimited) {
		t.Fatalf("mapped IPv4 of a limited address = %v", err)
	}
}

func TestSessionsOrganizationsAndStepUp(t *testing.T) {
	t.Parallel()
	f := setup(t)
	svc := f.svc
	ctx := context.Background()
	in, err := svc.SignUp(ctx, "ada@example.com", password, "Ada", addrA)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.AuthenticateSession(ctx, in.Token); !errors.Is(err, fault.ErrForbidden) {
		t.Fatalf("session without organization = %v, want forbidden", err)
	}
	org, err := svc.CreateOrganization(ctx, in.Token, "Ada Co", "ada-co")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateOrganization(ctx, in.Token, "Copy", "ada-co"); !errors.Is(err, identity.ErrSlugTaken) {
		t.Fatalf("duplicate slug = %v", err)
	}
	p, err := svc.AuthenticateSession(ctx, in.Token)
	if err != nil || p.OrganizationID != org.ID || p.Role != access.RoleOwner || !p.Permissions.Has(access.PermAuditRead) {
		t.Fatalf("principal %+v, %v", p, err)
	}
	if err := p.RequireStepUp(time.Now()); err != nil {
		t.Fatalf("fresh sign-in is a recent step-up: %v", err)
	}
	if err := p.RequireStepUp(time.Now().Add(16 * time.Minute)); !errors.Is(err, access.ErrStepUpRequired) {
		t.Fatalf("16 minutes later = %v", err)
	}
	if _, err := svc.Reauthenticate(ctx, in.Token, "wrong password here", addrA); !errors.Is(err, identity.ErrInvalidCredentials) {
		t.Fatalf("reauthenticate with wrong password = %v", err)
	}
	if _, err := svc.Reauthenticate(ctx, in.Token, password, addrA); err != nil {
		t.Fatal(err)
	}
	// Another user's organization cannot be activated, and looks missing.
	bob, _ := svc.SignUp(ctx, "bob@example.com", password, "Bob", addrA)
	if _, err := svc.SetActiveOrganization(ctx, bob.Token, org.ID); !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("activating a foreign organization = %v", err)
	}
	tokenP := access.Principal{Kind: access.KindServiceAccount, ReauthenticatedAt: time.Now()}
	if tokenP.RequireStepUp(time.Now()) == nil {
		t.Fatal("tokens must never satisfy step-up")
	}
	if err := svc.SignOut(ctx, in.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.AuthenticateSession(ctx, in.Token); !errors.Is(err, fault.ErrUnauthenticated) {
		t.Fatalf("signed-out session = %v", err)
	}
}

// join invites u into owner's active organization and accepts for u.
func join(t *testing.T, f fixture, owner access.Principal, u identity.SignedIn, role access.Role) {
	t.Helper()
	ctx := context.Background()
	inv, token, err := f.svc.InviteMember(ctx, owner, u.User.Email, role)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.AcceptInvitation(ctx, u.Token, inv.ID, token); err != nil {
		t.Fatal(err)
	}
}

func TestRoleChangesNeedOwnersForOwners(t *testing.T) {
	t.Parallel()
	f := setup(t)
	svc := f.svc
	ctx := context.Background()
	owner, _ := svc.SignUp(ctx, "owner@example.com", password, "Owner", addrA)
	admin, _ := svc.SignUp(ctx, "admin@example.com", password, "Admin", addrA)
	if _, err := svc.CreateOrganization(ctx, owner.Token, "Org", "org"); err != nil {
		t.Fatal(err)
	}
	op, _ := svc.AuthenticateSession(ctx, owner.Token)
	join(t, f, op, admin, access.RoleAdmin)
	if _, _, err := svc.InviteMember(ctx, op, "admin@example.com", access.RoleAdmin); !errors.Is(err, identity.ErrMemberExists) {
		t.Fatalf("inviting a member = %v", err)
	}
	ap, err := svc.AuthenticateSession(ctx, admin.Token)
	if err != nil || ap.OrganizationID != op.OrganizationID || ap.Role != access.RoleAdmin {
		t.Fatalf("accepting did not switch the session: %+v, %v", ap, err)
	}
	if err := svc.RemoveMember(ctx, ap, owner.User.ID); !errors.Is(err, fault.ErrForbidden) {
		t.Fatalf("admin removing an owner = %v", err)
	}
	if _, err := svc.ChangeRole(ctx, ap, admin.User.ID, access.RoleOwner); !errors.Is(err, fault.ErrForbidden) {
		t.Fatalf("admin promoting to owner = %v", err)
	}
	if _, _, err := svc.InviteMember(ctx, ap, "new-owner@example.com", access.RoleOwner); !errors.Is(err, fault.ErrForbidden) {
		t.Fatalf("admin inviting an owner = %v", err)
	}
	if _, err := svc.ChangeRole(ctx, op, admin.User.ID, access.RoleOwner); err != nil {
		t.Fatal(err)
	}
	// Now two owners: one may step down.
	if _, err := svc.ChangeRole(ctx, op, owner.User.ID, access.RoleReader); err != nil {
		t.Fatal(err)
	}
	rp, _ := svc.AuthenticateSession(ctx, owner.Token)
	if rp.Role != access.RoleReader || rp.Permissions.Has(access.PermProjectWrite) {
		t.Fatalf("demotion not effective on the next request: %+v", rp)
	}
}
