package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// signInAs fills the dashboard's sign-in form and waits until the
// dashboard has moved on from it.
func signInAs(t *testing.T, ctx context.Context, s *Stack, email string) {
	t.Helper()
	browse(t, ctx, "signing in as "+email,
		chromedp.Navigate(s.DashboardURL+"/sign-in"),
		chromedp.WaitVisible(chromedp.CSS("#email")),
		chromedp.SendKeys(chromedp.CSS("#email"), email),
		chromedp.SendKeys(chromedp.CSS("#password"), "correct horse battery staple"),
		chromedp.Click(chromedp.CSS("form button[type=submit]")),
		chromedp.WaitNotPresent(chromedp.CSS("#password")),
	)
}

// TestDashboardInvitationIsAcceptedByTheInvitee: an owner invites an
// address from the organizations page and gets the link once; the account
// already registered under that address signs in, lands on its
// organizations page (it has none yet) and sees the invitation, is not a
// member until it opens the link and accepts, and then is one, with the
// invited role and the organization active.
func TestDashboardInvitationIsAcceptedByTheInvitee(t *testing.T) {
	t.Parallel()
	s := StartStack(t)
	suffix := time.Now().UnixNano()
	ownerEmail, inviteeEmail := fmt.Sprintf("owner-%d@example.com", suffix), fmt.Sprintf("invitee-%d@example.com", suffix)
	var owner struct{ Token string }
	for _, u := range []struct {
		email string
		out   any
	}{{ownerEmail, &owner}, {inviteeEmail, nil}} {
		if st := s.apiJSON(t, http.MethodPost, "/api/auth/sign-up/email",
			map[string]string{"email": u.email, "password": "correct horse battery staple", "name": strings.Split(u.email, "-")[0]}, u.out); st != http.StatusOK {
			t.Fatalf("sign-up %s: %d", u.email, st)
		}
	}
	ownerCookie := []string{"Cookie", "__Secure-identity.session_token=" + owner.Token}
	if st := s.apiJSON(t, http.MethodPost, "/api/auth/organization/create",
		map[string]string{"name": "Invite Co", "slug": fmt.Sprintf("invite-%d", suffix%1_000_000)}, nil, ownerCookie...); st != http.StatusOK {
		t.Fatalf("organization: %d", st)
	}
	memberRoles := func() map[string]string {
		var members []struct{ Email, Role string }
		if st := s.apiJSON(t, http.MethodGet, "/api/auth/organization/list-members", nil, &members, ownerCookie...); st != http.StatusOK {
			t.Fatalf("list-members: %d", st)
		}
		out := map[string]string{}
		for _, m := range members {
			out[m.Email] = m.Role
		}
		return out
	}

	ctx := newBrowser(t)
	signInAs(t, ctx, s, ownerEmail)
	browse(t, ctx, "inviting from the organizations page",
		chromedp.Navigate(s.DashboardURL+"/organizations"),
		chromedp.WaitVisible(chromedp.CSS("#invite-email")),
		chromedp.SendKeys(chromedp.CSS("#invite-email"), inviteeEmail),
		chromedp.SetValue(chromedp.CSS("#invite-role"), "writer"),
		chromedp.Click(chromedp.CSS("#invite form button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#invitation-link")),
	)
	link, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS("#invitation-link")))
	if err != nil || !strings.HasPrefix(link, s.DashboardURL+"/invitations/inv_") || !strings.Contains(link, "token=cit_") {
		t.Fatalf("invitation link %q, %v", link, err)
	}
	waitText(t, ctx, "#pending-invitations", inviteeEmail)
	screenshot(t, ctx, "organizations-invite")
	browse(t, ctx, "signing out", chromedp.Click(chromedp.CSS(".signout button")), chromedp.WaitVisible(chromedp.CSS("#email")))

	// Without an organization, signing in lands on the organizations page,
	// which shows the invitation; the account is not a member.
	signInAs(t, ctx, s, inviteeEmail)
	waitText(t, ctx, "#invitations-for-you", "Invite Co")
	screenshot(t, ctx, "organizations-invitation-for-you")
	if _, ok := memberRoles()[inviteeEmail]; ok {
		t.Fatal("the invited account is a member before accepting")
	}
	browse(t, ctx, "opening the invitation link",
		chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.CSS("#accept-invitation")),
	)
	waitText(t, ctx, "main", "as writer")
	if _, ok := memberRoles()[inviteeEmail]; ok {
		t.Fatal("opening the link made the account a member")
	}
	browse(t, ctx, "accepting", chromedp.Click(chromedp.CSS("#accept-invitation")))
	waitText(t, ctx, "main .notice", "Invitation accepted")
	waitText(t, ctx, "main table.grid", "Invite Co")
	waitText(t, ctx, "main table.grid", "Active")
	if role := memberRoles()[inviteeEmail]; role != "writer" {
		t.Fatalf("after accepting the invitee's role is %q, members %v", role, memberRoles())
	}
	// The link is single use: opening it again offers nothing to accept.
	browse(t, ctx, "opening the link again", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("main a[href='/organizations']")))
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int]("document.querySelectorAll('#accept-invitation').length")); n != 0 {
		t.Fatal("a used invitation can be accepted again from its link")
	}
}
