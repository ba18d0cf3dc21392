package site

import (
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

func TestStagesFollowTheRecordedFacts(t *testing.T) {
	t.Parallel()
	soft, pass := "soft_failed", "pass"
	yes := true
	now := time.Now()
	review := func(status, plan, apply string, outcome *string) runReview {
		r := runReview{runSummary: runSummary{Kind: "plan_and_apply", Status: status, StatusTimestamps: map[string]time.Time{"planning": now.Add(-time.Second)}}}
		r.Plan.Status, r.Apply.Status, r.Policy.Outcome, r.Plan.HasChanges = plan, apply, outcome, &yes
		return r
	}
	for _, tc := range []struct {
		name string
		run  runReview
		want [4]string
	}{
		{"planning", review("planning", "running", "pending", nil), [4]string{"running", "pending", "pending", "pending"}},
		{"waiting on a soft failure", review("policy_override", "finished", "pending", &soft), [4]string{"succeeded", "waiting", "waiting", "pending"}},
		{"awaiting approval", review("awaiting_approval", "finished", "pending", &pass), [4]string{"succeeded", "succeeded", "waiting", "pending"}},
		{"plan errored", review("errored", "errored", "pending", nil), [4]string{"failed", "skipped", "skipped", "skipped"}},
	} {
		stages := stagesOf(tc.run)
		for i, s := range stages {
			if s.State != tc.want[i] {
				t.Errorf("%s: %s is %s, want %s", tc.name, s.Name, s.State, tc.want[i])
			}
		}
	}
	// The policy stage opens by itself unless the outcome is pass.
	if stagesOf(review("policy_override", "finished", "pending", &soft))[1].Open != true ||
		stagesOf(review("awaiting_approval", "finished", "pending", &pass))[1].Open {
		t.Error("policy stage expansion does not follow the outcome")
	}
}

func TestFormsAndSocketsMustComeFromTheDashboard(t *testing.T) {
	t.Parallel()
	s := &Site{opts: Options{Origin: "https://dash.example"}}
	for _, tc := range []struct {
		origin, fetchSite string
		want              bool
	}{
		{"https://dash.example", "", true},
		{"https://dash.example", "same-origin", true},
		{"https://evil.example", "", false},
		{"https://dash.example", "cross-site", false},
		{"", "same-origin", true},
		{"", "", false},
		{"", "same-site", false},
		{"null", "", false},
	} {
		r := httptest.NewRequest("POST", "https://dash.example/runs/run_x/approve", nil)
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		if tc.fetchSite != "" {
			r.Header.Set("Sec-Fetch-Site", tc.fetchSite)
		}
		if got := s.sameOrigin(r); got != tc.want {
			t.Errorf("Origin %q, Sec-Fetch-Site %q: %v, want %v", tc.origin, tc.fetchSite, got, tc.want)
		}
	}
}

func TestRunFilterMatchesIDMessageOrWorkspace(t *testing.T) {
	t.Parallel()
	if !matches("PROD", "run_1", "deploy", "prod-network") || !matches("run_1", "run_1", "", "") || matches("staging", "run_1", "deploy", "prod") {
		t.Error("free-text filter")
	}
}

func TestInvitationCodeMayBeTheWholeLink(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"cit_abc":   "cit_abc",
		" cit_abc ": "cit_abc",
		"https://dash.example/invitations/inv_x?token=cit_abc":       "cit_abc",
		"https://dash.example/invitations/inv_x?token=cit_a%2Bb&x=1": "cit_a+b",
		"https://dash.example/invitations/inv_x":                     "https://dash.example/invitations/inv_x",
	} {
		if got := invitationToken(raw); got != want {
			t.Errorf("invitationToken(%q) = %q, want %q", raw, got, want)
		}
	}
	if len(inviteRoles("reader")) != 0 || len(inviteRoles("writer")) != 0 ||
		slices.Contains(inviteRoles("admin"), "owner") || !slices.Contains(inviteRoles("owner"), "owner") {
		t.Error("the invite form offers roles the member cannot grant")
	}
}

// TestSignInContinuesOnlyToConsent: the next parameter of sign-in returns
// to the consent screen and nowhere else.
func TestSignInContinuesOnlyToConsent(t *testing.T) {
	t.Parallel()
	for next, want := range map[string]string{
		"/oauth/consent?client_id=a&sig=b": "/oauth/consent?client_id=a&sig=b",
		"https://evil.example/":            "/runs",
		"//evil.example/oauth/consent?x":   "/runs",
		"/oauth/consent":                   "/runs",
		"/oauth/consent?x\r\nSet-Cookie:":  "/runs",
		"/runs/run_x":                      "/runs",
	} {
		if got := nextAfterSignIn(next); got != want {
			t.Errorf("%q: %q, want %q", next, got, want)
		}
	}
}
