package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// socketAlwaysFails replaces the page's WebSocket with one that closes
// abnormally (1006) right after it is made, as a dropped network does.
const socketAlwaysFails = `window.WebSocket = function (url) {
  var ws = this;
  window.__liveAttempts = (window.__liveAttempts || 0) + 1;
  setTimeout(function () { if (ws.onclose) ws.onclose({ code: 1006 }); }, 50);
  this.close = function () {};
};`

// TestLiveConsoleFallsBackToPollingWhenTheSocketFails: with every live
// socket failing, the run page of a run waiting for approval
// says "Reconnecting — data may be stale", offers Refresh log, and keeps
// reading the HTTP log route on its own, so the console still fills.
func TestLiveConsoleFallsBackToPollingWhenTheSocketFails(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "fallback")
	ws := s.createWorkspace(t, m, "fallback", "us")
	cfg := s.uploadConfiguration(t, m, ws, map[string]string{"main.tf": `resource "terraform_data" "x" { input = "a" }`})
	st, r := s.createRun(t, m, ws, cfg, "plan_and_apply")
	if st != http.StatusCreated {
		t.Fatalf("run: %d", st)
	}
	s.waitRun(t, m, r.ID, 3*time.Minute, func(r runView) bool { return r.Status == "awaiting_approval" })

	ctx := newBrowser(t)
	signInThroughTheDashboard(t, ctx, s, m)
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: socketAlwaysFails}); err != nil {
		t.Fatal(err)
	}
	browse(t, ctx, "opening the run", chromedp.Navigate(s.DashboardURL+"/runs/"+r.ID), chromedp.WaitVisible(chromedp.CSS("#stage-Plan")))
	if open, _ := chromedp.Run(ctx, chromedp.Evaluate[bool]("document.querySelector('#stage-Plan').open")); !open {
		browse(t, ctx, "expanding the plan", chromedp.Click(chromedp.CSS("#stage-Plan > summary")))
	}
	waitText(t, ctx, "#stage-Plan .stale:not([hidden])", "Reconnecting — data may be stale")
	if n := count(t, ctx, "#stage-Plan .refresh-log:not([hidden])"); n != 1 {
		t.Fatal("no Refresh log while the live feed is detached")
	}
	waitText(t, ctx, "#stage-Plan .console", "Cairn plan phase")
	logReads := func() int {
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](
			`performance.getEntriesByType("resource").filter(e => e.name.includes("/runs/`+r.ID+`/logs")).length`))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := logReads()
	time.Sleep(12 * time.Second)
	if after := logReads(); after <= before {
		t.Fatalf("the page stopped reading the log route without its socket: %d reads, then %d", before, after)
	}
	// It keeps trying the socket too, every few seconds, not in a tight loop.
	if attempts, _ := chromedp.Run(ctx, chromedp.Evaluate[int]("window.__liveAttempts || 0")); attempts < 4 || attempts > 12 {
		t.Fatalf("%d socket attempts in about 20 s", attempts)
	}
	screenshot(t, ctx, "run-reconnecting")
	expectNoExceptions(t, ctx)
}
