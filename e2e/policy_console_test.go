package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
)

// policyLogChunk is a chunk of GET /v1/runs/{id}/logs, or a log event of
// the live channel.
type policyLogChunk struct {
	Type      string     `json:"type"`
	Sequence  int64      `json:"sequence"`
	Phase     string     `json:"phase"`
	Body      string     `json:"body"`
	CreatedAt *time.Time `json:"created_at"`
}

// TestPolicyStageLogStreamsLiveAndEveryStageHasAConsole follows a real run
// whose soft-mandatory policy fails. Its policy stage writes a policy log
// that arrives on the dashboard's live channel after the plan's chunks, in
// sequence; GET /v1/runs/{id}/logs serves it by phase and as a tail, and
// refuses an unknown phase; the plan log no longer carries the policy
// lines. After an override and a discard, the run page in Chromium shows
// the policy stage's console with that log, the approval stage's events
// (the wait for overrides, the override with its justification, the wait
// for approval, the discard with its reason, each with its time), and no
// console for the skipped apply.
func TestPolicyStageLogStreamsLiveAndEveryStageHasAConsole(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "polcon")
	ws := s.createWorkspace(t, m, "policy-console", "us")
	s.attachPolicy(t, m, ws, s.publishPolicy(t, m, ws, "require-tags"), "soft_mandatory")
	d := signInToDashboard(t, s, m.email)

	cfg := s.uploadConfiguration(t, m, ws, map[string]string{"main.tf": `resource "terraform_data" "cache" {
  input = { size = 1 }
}
`})
	st, r := s.createRun(t, m, ws, cfg, "plan_and_apply")
	if st != http.StatusCreated {
		t.Fatalf("run: %d", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, strings.Replace(s.DashboardURL, "http", "ws", 1)+"/live/runs/"+r.ID,
		&websocket.DialOptions{HTTPClient: d.client, HTTPHeader: http.Header{"Origin": {s.DashboardURL}}})
	if err != nil {
		t.Fatalf("opening the live channel: %v", err)
	}
	defer conn.CloseNow()
	opened := time.Now()

	// The channel carries the plan log, then the policy log, in sequence,
	// until the policy outcome.
	var live []policyLogChunk
	var liveText strings.Builder
	for !strings.Contains(liveText.String(), "Policy outcome:") {
		var ev policyLogChunk
		if err := wsjson.Read(ctx, conn, &ev); err != nil {
			t.Fatalf("reading the live channel after %d chunks: %v\npolicy log so far:\n%s", len(live), err, liveText.String())
		}
		if ev.Type != "log" {
			continue
		}
		if n := len(live); n > 0 && ev.Sequence != live[n-1].Sequence+1 {
			t.Fatalf("live chunk %d after %d", ev.Sequence, live[n-1].Sequence)
		}
		if n := len(live); n > 0 && live[n-1].Phase == "policy" && ev.Phase != "policy" {
			t.Fatalf("a %s chunk inside the policy log", ev.Phase)
		}
		live = append(live, ev)
		if ev.Phase == "policy" {
			liveText.WriteString(ev.Body)
		}
	}
	var pushed bool
	for _, c := range live {
		if c.Phase == "policy" && c.CreatedAt != nil && c.CreatedAt.After(opened) {
			pushed = true
		}
	}
	if live[0].Phase != "plan" || !pushed {
		t.Fatalf("the policy log was not pushed after the plan log: first phase %s, pushed %v", live[0].Phase, pushed)
	}

	// The log route serves the same policy log by phase, and its tail.
	var chunks []policyLogChunk
	if st := s.apiJSON(t, http.MethodGet, "/v1/runs/"+r.ID+"/logs?phase=policy", nil, &chunks, m.cookie()...); st != http.StatusOK {
		t.Fatalf("policy log: %d", st)
	}
	var routeText strings.Builder
	for _, c := range chunks {
		if c.Phase != "policy" {
			t.Fatalf("phase=policy answered a %s chunk", c.Phase)
		}
		routeText.WriteString(c.Body)
	}
	policyLog := routeText.String()
	if policyLog != liveText.String() {
		t.Fatalf("the log route's policy log differs from the live one:\n%s\n---\n%s", policyLog, liveText.String())
	}
	for _, want := range []string{"Evaluating 1 policy set(s) against the sanitized plan, in this order:",
		"1. require-tags v1 (workspace scope, soft_mandatory)", "1. require-tags v1: failed with 1 finding(s)",
		"Required tags are missing (terraform_data.cache)", "Policy outcome: soft_failed"} {
		if !strings.Contains(policyLog, want) {
			t.Fatalf("policy log lacks %q:\n%s", want, policyLog)
		}
	}
	var tail []policyLogChunk
	if st := s.apiJSON(t, http.MethodGet, "/v1/runs/"+r.ID+"/logs?phase=policy&tail=1", nil, &tail, m.cookie()...); st != http.StatusOK ||
		len(tail) != 1 || tail[0].Sequence != chunks[len(chunks)-1].Sequence {
		t.Fatalf("policy log tail: %d %+v", st, tail)
	}
	var planChunks []policyLogChunk
	s.apiJSON(t, http.MethodGet, "/v1/runs/"+r.ID+"/logs?phase=plan", nil, &planChunks, m.cookie()...)
	for _, c := range planChunks {
		if c.Phase != "plan" || strings.Contains(c.Body, "Policy outcome") {
			t.Fatalf("phase=plan answered %s chunk %q", c.Phase, c.Body)
		}
	}
	if st := s.apiJSON(t, http.MethodGet, "/v1/runs/"+r.ID+"/logs?phase=audit", nil, nil, m.cookie()...); st/100 != 4 {
		t.Fatalf("an unknown phase: %d", st)
	}

	// An override, then a discard: the approval stage's events.
	r = s.waitRun(t, m, r.ID, 30*time.Second, status("policy_override"))
	p, _ := s.runPolicy(t, m, r.ID)
	if len(p.Results) != 1 {
		t.Fatalf("policy results: %+v", p)
	}
	if st, body := s.override(t, m, r.ID, p.Results[0].ResultDigest, time.Now().Add(time.Hour)); st != http.StatusCreated {
		t.Fatalf("override: %d %s", st, body)
	}
	r = s.waitRun(t, m, r.ID, 30*time.Second, status("awaiting_approval"))
	if st, body := call(t, s.Client, http.MethodPost, s.APIURL+"/v1/runs/"+r.ID+"/actions/reject",
		mustJSON(map[string]any{"plan_digest": *r.Plan.PlanDigest, "policy_result_digest": *r.Policy.ResultDigest,
			"predecessor_state_version_id": r.Plan.PredecessorStateVersionID, "dependency_lock_digest": r.Pinned.DependencyLockDigest,
			"reason": "Caching waits for the tags."}), m.mutate(uniqueKey("reject"))...); st != http.StatusOK {
		t.Fatalf("discard: %d %s", st, body)
	}

	browser := newBrowser(t)
	signInThroughTheDashboard(t, browser, s, m)
	browse(t, browser, "opening the run", chromedp.Navigate(s.DashboardURL+"/runs/"+r.ID), chromedp.WaitVisible(chromedp.CSS("#stage-Policy")))
	// The policy stage opens by itself (its outcome is not pass) and its
	// console loads the policy log.
	waitText(t, browser, "#stage-Policy .console", "1. require-tags v1: failed with 1 finding(s)")
	waitText(t, browser, "#stage-Policy .console", "Policy outcome: soft_failed")
	browse(t, browser, "opening the approval stage", chromedp.Click(chromedp.CSS("#stage-Approval > summary")),
		chromedp.WaitVisible(chromedp.CSS("#approval-events")))
	for _, want := range []string{"Waiting for policy overrides", "Soft failure of require-tags v1 overridden by user ",
		"change window approved by the on-call lead", "Waiting for approval until", "Discarded by polcon", "Caching waits for the tags."} {
		waitText(t, browser, "#approval-events", want)
	}
	// Events read in time order, each with its time.
	events, err := chromedp.Run(browser, chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll('#approval-events li')).map(li => li.querySelector('time').getAttribute('datetime') + ' ' + li.textContent)`))
	if err != nil || len(events) != 4 || !strings.Contains(events[0], "Waiting for policy overrides") || !strings.Contains(events[3], "Discarded by") {
		t.Fatalf("approval events: %v %q", err, events)
	}
	for i := 1; i < len(events); i++ {
		if events[i][:20] < events[i-1][:20] {
			t.Fatalf("approval events out of order: %q", events)
		}
	}
	// The apply was skipped: it has no console.
	if n, _ := chromedp.Run(browser, chromedp.Evaluate[int](`document.querySelectorAll('#stage-Apply .console').length`)); n != 0 {
		t.Fatalf("the skipped apply stage has %d console(s)", n)
	}
	expectNoExceptions(t, browser)
	screenshot(t, browser, "run-policy-console")
}
