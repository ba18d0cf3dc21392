package identity_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/identity"
	"github.com/cairnhq/cairn/api/platform/fault"
)

// orgWithOwner signs up an owner of a fresh organization.
func orgWithOwner(t *testing.T, f fixture, email, slug string) (identity.SignedIn, access.Principal) {
	t.Helper()
	ctx := context.Background()
	owner, err := f.svc.SignUp(ctx, email, password, "Owner", addrA)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.CreateOrganization(ctx, owner.Token, "Org "+slug, slug); err != nil {
		t.Fatal(err)
	}
	p, err := f.svc.AuthenticateSession(ctx, owner.Token)
	if err != nil {
		t.Fatal(err)
	}
	return owner, p
}

func memberEmails(t *testing.T, f fixture, p access.Principal) []string {
	t.Helper()
	members, err := f.svc.ListMembers(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range members {
		out = append(out, m.Email)
	}
	return out
}

// TestPreRegisteredAccountIsNotAMemberUntilItAccepts is the attack that
// add-member allowed: an account registered under a colleague's address
// before the colleague was invited. The invitation alone changes nothing;
// the account must accept it, and accepting needs the token the inviter
// handed over, not just the address.
func TestPreRegisteredAccountIsNotAMemberUntilItAccepts(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	_, owner := orgWithOwner(t, f, "owner@example.com", "acme")
	squatter, err := f.svc.SignUp(ctx, "colleague@example.com", password, "Colleague?", addrB)
	if err != nil {
		t.Fatal(err)
	}
	inv, token, err := f.svc.InviteMember(ctx, owner, "Colleague@Example.com", access.RoleWriter)
	if err != nil {
		t.Fatal(err)
	}
	if inv.Email != "colleague@example.com" || inv.Role != access.RoleWriter || inv.Status != identity.InvitationPending ||
		!inv.ExpiresAt.Equal(inv.CreatedAt.Add(7*24*time.Hour)) || len(token) < 40 {
		t.Fatalf("invitation %+v, token of %d characters", inv, len(token))
	}
	if slices.Contains(memberEmails(t, f, owner), "colleague@example.com") {
		t.Fatal("invited account is a member before accepting")
	}
	if _, err := f.svc.SetActiveOrganization(ctx, squatter.Token, owner.OrganizationID); !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("activating the organization before accepting = %v", err)
	}
	mine, err := f.svc.ListUserInvitations(ctx, squatter.Token)
	if err != nil || len(mine) != 1 || mine[0].ID != inv.ID || mine[0].OrganizationName != "Org acme" || mine[0].InviterName != "Owner" {
		t.Fatalf("user invitations %+v, %v", mine, err)
	}
	// The address alone is not enough: not to join, and not to decline
	// (which would close the invitation the real colleague holds the
	// token of, every time the organization invites them again).
	for _, guess := range []string{"", "cit_wrong", token + "x"} {
		if _, err := f.svc.AcceptInvitation(ctx, squatter.Token, inv.ID, guess); !errors.Is(err, fault.ErrNotFound) {
			t.Fatalf("accepting with token %q = %v", guess, err)
		}
		if _, err := f.svc.RejectInvitation(ctx, squatter.Token, inv.ID, guess); !errors.Is(err, fault.ErrNotFound) {
			t.Fatalf("declining with token %q = %v", guess, err)
		}
	}
	if slices.Contains(memberEmails(t, f, owner), "colleague@example.com") {
		t.Fatal("member without the token")
	}
	// With the token the account joins with the invited role, in that
	// organization.
	got, err := f.svc.AcceptInvitation(ctx, squatter.Token, inv.ID, token)
	if err != nil || got.ID != owner.OrganizationID || got.Role != access.RoleWriter {
		t.Fatalf("accept = %+v, %v", got, err)
	}
	p, err := f.svc.AuthenticateSession(ctx, squatter.Token)
	if err != nil || p.OrganizationID != owner.OrganizationID || p.Role != access.RoleWriter {
		t.Fatalf("after accepting: %+v, %v", p, err)
	}
	// Single use.
	if _, err := f.svc.AcceptInvitation(ctx, squatter.Token, inv.ID, token); !errors.Is(err, identity.ErrInvitationClosed) {
		t.Fatalf("accepting twice = %v", err)
	}
	if left, _ := f.svc.ListUserInvitations(ctx, squatter.Token); len(left) != 0 {
		t.Fatalf("accepted invitation still listed: %+v", left)
	}
	// Evidence for each step, and the token nowhere in the database.
	var actions []string
	if err := f.db.Select(&actions, `SELECT action FROM audit_events WHERE organization_id = $1 ORDER BY created_at, action`, owner.OrganizationID); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"invitation.created", "invitation.accepted", "member.added"} {
		if !slices.Contains(actions, want) {
			t.Errorf("audit has %v, missing %s", actions, want)
		}
	}
	var leaks int
	if err := f.db.Get(&leaks, `
		SELECT (SELECT count(*) FROM invitations WHERE position($1 in id || email || encode(token_hash, 'escape')) > 0)
		     + (SELECT count(*) FROM audit_events WHERE position($1 in evidence::text) > 0)`, token); err != nil || leaks != 0 {
		t.Fatalf("token stored in clear: %d, %v", leaks, err)
	}
}

func TestInvitationsRefuseTheWrongAccountAndClosedOnes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	_, owner := orgWithOwner(t, f, "owner@example.com", "acme")
	invitee, _ := f.svc.SignUp(ctx, "invitee@example.com", password, "Invitee", addrB)
	other, _ := f.svc.SignUp(ctx, "other@example.com", password, "Other", addrB)

	// Another account cannot accept or decline, even with the token.
	inv, token, err := f.svc.InviteMember(ctx, owner, "invitee@example.com", access.RoleReader)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.AcceptInvitation(ctx, other.Token, inv.ID, token); !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("wrong account accepting = %v", err)
	}
	if _, err := f.svc.RejectInvitation(ctx, other.Token, inv.ID, token); !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("wrong account declining = %v", err)
	}
	if _, _, err := f.svc.InviteMember(ctx, owner, "invitee@example.com", access.RoleAdmin); !errors.Is(err, identity.ErrInvitationPending) {
		t.Fatalf("second open invitation = %v", err)
	}

	// Revoked: the inviter's side lists it, cancels it, and it is dead.
	pending, err := f.svc.ListInvitations(ctx, owner)
	if err != nil || len(pending) != 1 || pending[0].ID != inv.ID {
		t.Fatalf("pending %+v, %v", pending, err)
	}
	if _, err := f.svc.CancelInvitation(ctx, owner, inv.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.AcceptInvitation(ctx, invitee.Token, inv.ID, token); !errors.Is(err, identity.ErrInvitationClosed) {
		t.Fatalf("accepting a canceled invitation = %v", err)
	}
	if _, err := f.svc.CancelInvitation(ctx, owner, inv.ID); !errors.Is(err, identity.ErrInvitationClosed) {
		t.Fatalf("canceling twice = %v", err)
	}

	// Declined: closed for good.
	inv, token, err = f.svc.InviteMember(ctx, owner, "invitee@example.com", access.RoleReader)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := f.svc.RejectInvitation(ctx, invitee.Token, inv.ID, token); err != nil || got.Status != identity.InvitationRejected {
		t.Fatalf("decline = %+v, %v", got, err)
	}
	if _, err := f.svc.AcceptInvitation(ctx, invitee.Token, inv.ID, token); !errors.Is(err, identity.ErrInvitationClosed) {
		t.Fatalf("accepting a declined invitation = %v", err)
	}

	// Expired: refused, hidden from the invitee, shown as expired to the
	// inviter, and replaced by a new invitation.
	inv, token, err = f.svc.InviteMember(ctx, owner, "invitee@example.com", access.RoleReader)
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(7*24*time.Hour + time.Second)
	if _, err := f.svc.AcceptInvitation(ctx, invitee.Token, inv.ID, token); !errors.Is(err, identity.ErrInvitationExpired) {
		t.Fatalf("accepting an expired invitation = %v", err)
	}
	if mine, _ := f.svc.ListUserInvitations(ctx, invitee.Token); len(mine) != 0 {
		t.Fatalf("expired invitation listed for the invitee: %+v", mine)
	}
	if pending, _ := f.svc.ListInvitations(ctx, owner); len(pending) != 1 || pending[0].Status != identity.InvitationExpired {
		t.Fatalf("inviter's view of an expired invitation: %+v", pending)
	}
	fresh, freshToken, err := f.svc.InviteMember(ctx, owner, "invitee@example.com", access.RoleReader)
	if err != nil {
		t.Fatalf("inviting again after expiry: %v", err)
	}
	// An old token does not open the new invitation.
	if _, err := f.svc.AcceptInvitation(ctx, invitee.Token, fresh.ID, token); !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("old token on a new invitation = %v", err)
	}
	if _, err := f.svc.AcceptInvitation(ctx, invitee.Token, fresh.ID, freshToken); err != nil {
		t.Fatal(err)
	}
	// An expired invitation can also just be removed from the list.
	stale, _, err := f.svc.InviteMember(ctx, owner, "someone@example.com", access.RoleReader)
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(8 * 24 * time.Hour)
	if got, err := f.svc.CancelInvitation(ctx, owner, stale.ID); err != nil || got.Status != identity.InvitationCanceled {
		t.Fatalf("removing an expired invitation = %+v, %v", got, err)
	}

	// Evidence of every step.
	var actions []string
	if err := f.db.Select(&actions, `SELECT action FROM audit_events WHERE organization_id = $1`, owner.OrganizationID); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"invitation.created", "invitation.canceled", "invitation.rejected", "invitation.accepted", "member.added"} {
		if !slices.Contains(actions, want) {
			t.Errorf("audit has %v, missing %s", actions, want)
		}
	}
}

// TestInvitationRoleRules: only owners invite owners or revoke such
// invitations, another organization's invitations look missing, readers
// cannot invite, and an invitation dies with its inviter's authority.
func TestInvitationRoleRules(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	_, owner := orgWithOwner(t, f, "owner@example.com", "acme")
	_, stranger := orgWithOwner(t, f, "stranger@example.com", "other")
	admin, _ := f.svc.SignUp(ctx, "admin@example.com", password, "Admin", addrB)
	reader, _ := f.svc.SignUp(ctx, "reader@example.com", password, "Reader", addrB)
	join(t, f, owner, admin, access.RoleAdmin)
	join(t, f, owner, reader, access.RoleReader)
	ap, _ := f.svc.AuthenticateSession(ctx, admin.Token)
	rp, _ := f.svc.AuthenticateSession(ctx, reader.Token)

	if _, _, err := f.svc.InviteMember(ctx, rp, "x@example.com", access.RoleReader); !errors.Is(err, fault.ErrForbidden) {
		t.Fatalf("reader inviting = %v", err)
	}
	if _, err := f.svc.ListInvitations(ctx, rp); !errors.Is(err, fault.ErrForbidden) {
		t.Fatalf("reader listing invitations = %v", err)
	}
	if _, _, err := f.svc.InviteMember(ctx, ap, "boss@example.com", access.RoleOwner); !errors.Is(err, fault.ErrForbidden) {
		t.Fatalf("admin inviting an owner = %v", err)
	}
	ownerInv, _, err := f.svc.InviteMember(ctx, owner, "boss@example.com", access.RoleOwner)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.CancelInvitation(ctx, ap, ownerInv.ID); !errors.Is(err, fault.ErrForbidden) {
		t.Fatalf("admin revoking an owner invitation = %v", err)
	}
	if _, err := f.svc.CancelInvitation(ctx, stranger, ownerInv.ID); !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("another organization revoking = %v", err)
	}

	// The admin invites, then loses the role: the invitation no longer
	// grants anything.
	byAdmin, adminToken, err := f.svc.InviteMember(ctx, ap, "late@example.com", access.RoleWriter)
	if err != nil {
		t.Fatal(err)
	}
	late, _ := f.svc.SignUp(ctx, "late@example.com", password, "Late", addrB)
	if _, err := f.svc.ChangeRole(ctx, owner, admin.User.ID, access.RoleReader); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.AcceptInvitation(ctx, late.Token, byAdmin.ID, adminToken); !errors.Is(err, identity.ErrInvitationClosed) {
		t.Fatalf("accepting the invitation of a demoted admin = %v", err)
	}
	if slices.Contains(memberEmails(t, f, owner), "late@example.com") {
		t.Fatal("joined through a dead invitation")
	}
}
