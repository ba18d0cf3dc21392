package identity_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/identity"
	"github.com/cairnhq/cairn/api/platform/dbtest"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/server"
)

func setup(t *testing.T) *identity.Service {
	t.Helper()
	svc, err := identity.NewService(dbtest.New(t), server.IdentityOptions(apitest.TestConfig()))
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func TestPasswordHashRoundTrip(t *testing.T) {
	t.Parallel()
	params := identity.PasswordParams{MemoryKiB: 64, Iterations: 1, Parallelism: 1}
	hash, err := identity.HashPassword("correct horse battery staple", params)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(hash, "$argon2id$v=19$m=64,t=1,p=1$") {
		t.Fatalf("hash %q is not argon2id PHC", hash)
	}
	for pw, want := range map[string]bool{"correct horse battery staple": true, "correct horse battery stapl": false, "": false} {
		ok, err := identity.VerifyPassword(pw, hash)
		if err != nil || ok != want {
			t.Errorf("verify(%q) = %v, %v; want %v", pw, ok, err, want)
		}
	}
	if _, err := identity.VerifyPassword("x", "$2a$10$bcrypt"); err == nil {
		t.Fatal("non-argon2id hash accepted")
	}
	other, _ := identity.HashPassword("correct horse battery staple", params)
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

func TestSignInDoesNotRevealWhichEmailsExistAndIsRateLimited(t *testing.T) {
	t.Parallel()
	svc := setup(t)
	ctx := context.Background()
	if _, err := svc.SignUp(ctx, "known@example.com", "correct horse battery staple", "Known"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SignUp(ctx, "KNOWN@example.com", "correct horse battery staple", "Again"); !errors.Is(err, identity.ErrEmailTaken) {
		t.Fatalf("duplicate sign-up = %v", err)
	}
	_, errKnown := svc.SignIn(ctx, "known@example.com", "wrong password here", "10.0.0.1")
	_, errUnknown := svc.SignIn(ctx, "unknown@example.com", "wrong password here", "10.0.0.1")
	if !errors.Is(errKnown, identity.ErrInvalidCredentials) || !errors.Is(errUnknown, identity.ErrInvalidCredentials) || errKnown.Error() != errUnknown.Error() {
		t.Fatalf("failures differ: %v / %v", errKnown, errUnknown)
	}
	if _, err := svc.SignIn(ctx, "known@example.com", "correct horse battery staple", "10.0.0.2"); err != nil {
		t.Fatalf("correct sign-in: %v", err)
	}
	// Ten failures for one e-mail lock it, even with the right password.
	for range 9 {
		_, _ = svc.SignIn(ctx, "known@example.com", "wrong password here", "10.0.0.3")
	}
	if _, err := svc.SignIn(ctx, "known@example.com", "correct horse battery staple", "10.0.0.4"); !errors.Is(err, identity.ErrRateLimited) {
		t.Fatalf("after 10 failures = %v, want rate limited", err)
	}
	// Unknown e-mails are limited the same way, so the limit reveals nothing.
	for range 10 {
		_, _ = svc.SignIn(ctx, "ghost@example.com", "wrong password here", "10.0.0.5")
	}
	if _, err := svc.SignIn(ctx, "ghost@example.com", "wrong password here", "10.0.0.6"); !errors.Is(err, identity.ErrRateLimited) {
		t.Fatalf("unknown e-mail after 10 failures = %v", err)
	}
}

func TestSessionsOrganizationsAndStepUp(t *testing.T) {
	t.Parallel()
	svc := setup(t)
	ctx := context.Background()
	in, err := svc.SignUp(ctx, "ada@example.com", "correct horse battery staple", "Ada")
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
	if _, err := svc.Reauthenticate(ctx, in.Token, "wrong password here", "x"); !errors.Is(err, identity.ErrInvalidCredentials) {
		t.Fatalf("reauthenticate with wrong password = %v", err)
	}
	if _, err := svc.Reauthenticate(ctx, in.Token, "correct horse battery staple", "x"); err != nil {
		t.Fatal(err)
	}
	// Another user's organization cannot be activated, and looks missing.
	bob, _ := svc.SignUp(ctx, "bob@example.com", "correct horse battery staple", "Bob")
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

func TestRoleChangesNeedOwnersForOwners(t *testing.T) {
	t.Parallel()
	svc := setup(t)
	ctx := context.Background()
	owner, _ := svc.SignUp(ctx, "owner@example.com", "correct horse battery staple", "Owner")
	admin, _ := svc.SignUp(ctx, "admin@example.com", "correct horse battery staple", "Admin")
	if _, err := svc.CreateOrganization(ctx, owner.Token, "Org", "org"); err != nil {
		t.Fatal(err)
	}
	op, _ := svc.AuthenticateSession(ctx, owner.Token)
	if _, err := svc.AddMember(ctx, op, "admin@example.com", access.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.AddMember(ctx, op, "admin@example.com", access.RoleAdmin); !errors.Is(err, identity.ErrMemberExists) {
		t.Fatalf("adding twice = %v", err)
	}
	if _, err := svc.SetActiveOrganization(ctx, admin.Token, op.OrganizationID); err != nil {
		t.Fatal(err)
	}
	ap, _ := svc.AuthenticateSession(ctx, admin.Token)
	if err := svc.RemoveMember(ctx, ap, owner.User.ID); !errors.Is(err, fault.ErrForbidden) {
		t.Fatalf("admin removing an owner = %v", err)
	}
	if _, err := svc.ChangeRole(ctx, ap, admin.User.ID, access.RoleOwner); !errors.Is(err, fault.ErrForbidden) {
		t.Fatalf("admin promoting to owner = %v", err)
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
