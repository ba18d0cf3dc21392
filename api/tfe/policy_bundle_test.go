package tfe_test

import (
	"context"
	"crypto/sha256"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/policy/policytest"
)

const alwaysPass = "package cairn.v1\n\ndecision := {\"findings\": []}\n"

// TestPolicyBundleGrant checks the bundle grant an evaluation process
// fetches its bundle with (SPEC §4): the exact grant streams the
// snapshotted bundle; an expired, tampered, re-aimed (another attempt,
// another sequence, a sequence outside the snapshot) or spent grant (the
// attempt stopped running) gets the same 404 as a missing resource.
func TestPolicyBundleGrant(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	f := policytest.New(t, env, "grants")
	v := f.Publish(t, "always-pass", map[string]string{"policy.rego": alwaysPass})
	f.Attach(t, v, "advisory")
	st := f.StartPlan(t)
	other := f.StartPlan(t) // a second running attempt with the same snapshot
	policies, runs := env.Server.Services().Policies, env.Server.Services().Runs
	c := env.Anonymous()
	soon := time.Now().Add(time.Minute)

	ok := c.Get(policies.BundleGrant(st.Attempt.ID, 1, soon)).MustStatus(t, http.StatusOK)
	if sum := sha256.Sum256(ok.Body); string(sum[:]) != string(v.BundleSHA256) {
		t.Fatal("the granted bundle is not the snapshotted one")
	}
	if ok.Header.Get("Cache-Control") != "private, no-store" {
		t.Fatalf("Cache-Control %q", ok.Header.Get("Cache-Control"))
	}
	// Retriable until its deadline: the same grant works again.
	c.Get(policies.BundleGrant(st.Attempt.ID, 1, soon)).MustStatus(t, http.StatusOK)

	grant := policies.BundleGrant(st.Attempt.ID, 1, soon)
	notFound := c.Get("/api/v2/run-attempts/"+st.Attempt.ID+"/no-such-route").MustStatus(t, http.StatusNotFound)
	refused := map[string]string{
		"expired":              policies.BundleGrant(st.Attempt.ID, 1, time.Now().Add(-2*time.Second)),
		"another attempt":      strings.Replace(grant, st.Attempt.ID, other.Attempt.ID, 1),
		"another sequence":     strings.Replace(grant, "evaluation=1", "evaluation=2", 1),
		"sequence spelled 01":  strings.Replace(grant, "evaluation=1", "evaluation=01", 1),
		"outside the snapshot": policies.BundleGrant(st.Attempt.ID, 2, soon),
		"tampered signature":   grant[:len(grant)-2] + flip(grant[len(grant)-2:]),
		"later expiry":         regexp.MustCompile(`expires=\d+`).ReplaceAllString(grant, "expires=9999999999"),
		"no signature":         regexp.MustCompile(`&signature=.*`).ReplaceAllString(grant, ""),
		"unknown attempt":      policies.BundleGrant("att_nosuchattempt", 1, soon),
	}
	for name, path := range refused {
		r := c.Get(path)
		if r.Status != http.StatusNotFound || withoutRequestID(r.Body) != withoutRequestID(notFound.Body) {
			t.Errorf("%s: %d %s, want the plain 404", name, r.Status, r.Body)
		}
	}

	// A grant is worth nothing once its attempt stops running.
	if _, err := runs.FailAttempt(context.Background(), st.Attempt.ID, "runner_error", -1, nil); err != nil {
		t.Fatal(err)
	}
	if r := c.Get(grant); r.Status != http.StatusNotFound || withoutRequestID(r.Body) != withoutRequestID(notFound.Body) {
		t.Fatalf("grant of a finished attempt: %d %s", r.Status, r.Body)
	}
	// The other attempt's own grant still works.
	c.Get(policies.BundleGrant(other.Attempt.ID, 1, soon)).MustStatus(t, http.StatusOK)
}

func flip(s string) string {
	if s[0] == 'A' {
		return "B" + s[1:]
	}
	return "A" + s[1:]
}

var requestID = regexp.MustCompile(`"request_id":"[^"]*"`)

func withoutRequestID(body []byte) string { return requestID.ReplaceAllString(string(body), "") }
