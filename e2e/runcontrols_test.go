package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/cairnhq/cairn/e2e/devstack"
)

// socketCounter counts the live sockets a page opens for one run.
type socketCounter struct {
	mu    sync.Mutex
	runID string
	n     atomic.Int64
}

func countSockets(t *testing.T, ctx context.Context) *socketCounter {
	t.Helper()
	c := &socketCounter{}
	if err := chromedp.Listen(ctx, func(ev any) {
		if ws, ok := ev.(*network.EventWebSocketCreated); ok {
			c.mu.Lock()
			id := c.runID
			c.mu.Unlock()
			if id != "" && strings.Contains(ws.URL, "/live/runs/"+id) {
				c.n.Add(1)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *socketCounter) watch(runID string) {
	c.mu.Lock()
	c.runID = runID
	c.mu.Unlock()
	c.n.Store(0)
}

// TestDashboardRunControls drives the run page's controls in Chromium: a
// discard records its reason and shows no failure log; a terminal run
// opens no live socket and Refresh log never duplicates lines; a canceled
// apply lands in recovery, whose panel shows the evidence and resolves it
// after a step-up (a wrong password does nothing); the console keeps only
// the newest 512 KiB of a large log.
func TestDashboardRunControls(t *testing.T) {
	t.Parallel()
	s := runsStack(t, "CAIRN_APPLY_INTERRUPT_GRACE=30s")
	m := s.newMember(t, "controls")
	ctx := newBrowser(t)
	sockets := countSockets(t, ctx)
	signInThroughTheDashboard(t, ctx, s, m)

	// Discard with a reason.
	ws := s.createWorkspace(t, m, "discard", "us")
	cfg := s.uploadConfiguration(t, m, ws, map[string]string{"main.tf": `resource "terraform_data" "one" { input = "x" }`})
	_, r := s.createRun(t, m, ws, cfg, "plan_and_apply")
	browse(t, ctx, "opening the run", chromedp.Navigate(s.DashboardURL+"/runs/"+r.ID), chromedp.WaitVisible(chromedp.CSS("#stage-Plan")))
	waitText(t, ctx, "#run-status", "awaiting approval")
	browse(t, ctx, "discarding",
		chromedp.Click(chromedp.CSS("#discard")),
		chromedp.SendKeys(chromedp.CSS("#reason"), "Planned against the wrong branch"),
		chromedp.Click(chromedp.CSS("#discard-button")),
	)
	waitText(t, ctx, "#run-status", "rejected")
	waitText(t, ctx, "#stage-Approval", "Discarded by")
	waitText(t, ctx, "#decision-reason", "Planned against the wrong branch")
	if n := evalString(t, ctx, "String(document.querySelectorAll('#final-log').length)"); n != "0" {
		t.Error("a discarded run shows a failure log")
	}

	// A terminal run opens no socket; Refresh log shows each line once.
	sockets.watch(r.ID)
	browse(t, ctx, "reopening the discarded run", chromedp.Navigate(s.DashboardURL+"/runs/"+r.ID),
		chromedp.WaitVisible(chromedp.CSS("#stage-Plan")), chromedp.Click(chromedp.CSS("#stage-Plan > summary")))
	waitText(t, ctx, "#stage-Plan .console", "Plan: 1 to add")
	browse(t, ctx, "refreshing the log twice",
		chromedp.Click(chromedp.CSS("#stage-Plan .refresh-log")),
		chromedp.Click(chromedp.CSS("#stage-Plan .refresh-log")),
	)
	time.Sleep(1500 * time.Millisecond)
	if n := evalString(t, ctx, "String(document.querySelector('#stage-Plan .console').textContent.split('Plan: 1 to add').length - 1)"); n != "1" {
		t.Errorf("the plan summary line appears %s times after Refresh log", n)
	}
	if n := sockets.n.Load(); n != 0 {
		t.Errorf("a terminal run opened %d live sockets", n)
	}

	// Cancel an apply midway: it lands in recovery; recover with step-up.
	_, applying := s.applyingMidway(t, m, "canceled-apply", 193)
	sockets.watch(applying.ID)
	browse(t, ctx, "opening the applying run", chromedp.Navigate(s.DashboardURL+"/runs/"+applying.ID), chromedp.WaitVisible(chromedp.CSS("#cancel")))
	// The counter sees the socket of a run in progress, so its zero above
	// means something.
	for deadline := time.Now().Add(10 * time.Second); sockets.n.Load() == 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a running run opened no live socket")
		}
	}
	browse(t, ctx, "canceling", chromedp.Click(chromedp.CSS("#cancel")), chromedp.Click(chromedp.CSS("#cancel-button")))
	waitText(t, ctx, "#run-status", "recovery required")
	waitText(t, ctx, "#recovery", "Emergency state SHA-256")
	rec := s.readRecovery(t, m, applying.ID)
	if rec.Recovery == nil || rec.Recovery.EmergencyStateDigest == nil {
		t.Fatalf("no emergency state in the review: %+v", rec.Recovery)
	}
	waitText(t, ctx, "#recovery", *rec.Recovery.EmergencyStateDigest)
	screenshot(t, ctx, "run-recovery")
	recoverWith := func(password string) {
		browse(t, ctx, "resolving the recovery",
			chromedp.SendKeys(chromedp.CSS("#recover-reason"), "Apply interrupted by cancel; importing what it created"),
			chromedp.Click(chromedp.CSS("input[name=confirm_fence_advance]")),
			chromedp.SendKeys(chromedp.CSS("#recover-password"), password),
			chromedp.Click(chromedp.CSS("#recover-button")),
		)
	}
	recoverWith("not the password at all")
	waitText(t, ctx, "#notice", "password is not right")
	if st := s.readRun(t, m, applying.ID).Status; st != "recovery_required" {
		t.Fatalf("a wrong password changed the run to %s", st)
	}
	recoverWith("correct horse battery staple")
	waitText(t, ctx, "#run-status", "recovered")
	waitText(t, ctx, "#notice", "emergency state is now")

	// The console keeps the newest 512 KiB of a larger log.
	big := s.createWorkspace(t, m, "big-log", "us")
	cfg = s.uploadConfiguration(t, m, big, map[string]string{"main.tf": `output "lines" {
  value = flatten([for i in range(100) : [for j in range(90) : "line-${i}-${j}-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"]])
}
`})
	_, bigRun := s.createRun(t, m, big, cfg, "plan_only")
	s.waitRun(t, m, bigRun.ID, 2*time.Minute, status("planned_and_finished"))
	browse(t, ctx, "opening the large log", chromedp.Navigate(s.DashboardURL+"/runs/"+bigRun.ID),
		chromedp.WaitVisible(chromedp.CSS("#stage-Plan")), chromedp.Click(chromedp.CSS("#stage-Plan > summary")))
	waitText(t, ctx, "#stage-Plan .console", "line-99-89-")
	length, err := chromedp.Run(ctx, chromedp.Evaluate[int]("document.querySelector('#stage-Plan .console').textContent.length"))
	if err != nil || length > 512*1024 || length < 400*1024 {
		t.Errorf("the console holds %d characters (%v), want the newest 512 KiB", length, err)
	}
	if first := evalString(t, ctx, "document.querySelector('#stage-Plan .console').textContent"); strings.Contains(first, "line-0-0-") {
		t.Errorf("the console kept the oldest lines of a %d-byte log", len(s.logsOf(t, m, bigRun.ID)))
	}

	// New run from an uploaded archive, streamed through the dashboard.
	uploaded := s.createWorkspace(t, m, "uploaded", "us")
	archive := filepath.Join(t.TempDir(), "config.tar.gz")
	if err := os.WriteFile(archive, devstack.TarGz(map[string]string{"main.tf": `resource "terraform_data" "from_upload" { input = 1 }`}), 0o644); err != nil {
		t.Fatal(err)
	}
	browse(t, ctx, "starting a run from an upload",
		chromedp.Navigate(s.DashboardURL+"/workspaces/"+uploaded+"/start"),
		chromedp.WaitVisible(chromedp.CSS("#start-run")),
		chromedp.SetValue(chromedp.CSS("#run-kind"), "plan_only"),
		chromedp.SendKeys(chromedp.CSS("#run-message"), "Plan of an uploaded archive"),
		chromedp.SetUploadFiles(chromedp.CSS("#run-archive"), []string{archive}),
		chromedp.Click(chromedp.CSS("#start-run")),
		chromedp.WaitVisible(chromedp.CSS("#stage-Plan")),
	)
	waitText(t, ctx, "h1", "Plan of an uploaded archive")
	waitText(t, ctx, "#run-status", "planned and finished")
}
