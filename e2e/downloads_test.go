package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
)

// sensitiveDownloads counts the organization's audit events of restricted
// downloads.
func (s *Stack) sensitiveDownloads(t *testing.T, m member) int {
	t.Helper()
	var events []struct {
		Action string `json:"action"`
	}
	if st := s.apiJSON(t, http.MethodGet, "/v1/audit-events?limit=100", nil, &events, m.cookie()...); st != http.StatusOK {
		t.Fatalf("audit events: %d", st)
	}
	n := 0
	for _, e := range events {
		if e.Action == "artifact.sensitive_downloaded" {
			n++
		}
	}
	return n
}

// TestDashboardRestrictedStateDownload downloads an applied run's raw state
// from the run page's downloads section: a wrong password releases nothing
// and records nothing, a query string is refused, and the reason plus a
// fresh step-up release the state after its audit event is written.
func TestDashboardRestrictedStateDownload(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "download")
	ws := s.createWorkspace(t, m, "download", "us")
	cfg := s.uploadConfiguration(t, m, ws, map[string]string{"main.tf": `resource "terraform_data" "kept" { input = "in-the-state" }`})
	_, r := s.createRun(t, m, ws, cfg, "plan_and_apply")
	r = s.waitRun(t, m, r.ID, 90*time.Second, status("awaiting_approval"))
	if st := s.apiJSON(t, http.MethodPost, "/v1/runs/"+r.ID+"/actions/approve", r.binding(), nil, m.mutate(uniqueKey("approve"))...); st != http.StatusOK {
		t.Fatalf("approve: %d", st)
	}
	s.waitRun(t, m, r.ID, 90*time.Second, status("applied"))

	ctx := newBrowser(t)
	dir := t.TempDir()
	browse(t, ctx, "allowing downloads", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
			Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: dir})
		return err
	}))
	signInThroughTheDashboard(t, ctx, s, m)
	browse(t, ctx, "opening the run", chromedp.Navigate(s.DashboardURL+"/runs/"+r.ID), chromedp.WaitVisible(chromedp.CSS("#download-state")))
	screenshot(t, ctx, "run-downloads")

	// A query string is refused before anything else.
	refused, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(async () => {
		const form = new FormData(document.querySelector('#restricted-download'));
		form.set('reason', 'audit check'); form.set('password', 'correct horse battery staple');
		const r = await fetch(location.pathname + '/downloads/state?inline=1', {method: 'POST', body: new URLSearchParams(form)});
		return String(r.status);
	})()`, chromedp.EvalAwaitPromise))
	if err != nil || refused != "400" {
		t.Errorf("a download with a query string answered %s (%v), want 400", refused, err)
	}
	if n := s.sensitiveDownloads(t, m); n != 0 {
		t.Fatalf("%d downloads audited before any was allowed", n)
	}

	// A wrong password releases nothing.
	browse(t, ctx, "trying a wrong password",
		chromedp.SendKeys(chromedp.CSS("#download-reason"), "Incident 42: compare the state with the cloud"),
		chromedp.SendKeys(chromedp.CSS("#download-password"), "not my password"),
		chromedp.Click(chromedp.CSS("#download-state")),
	)
	waitText(t, ctx, "#notice", "password is not right")
	if n := s.sensitiveDownloads(t, m); n != 0 {
		t.Fatalf("a refused download was audited %d times", n)
	}

	browse(t, ctx, "downloading with a reason and step-up",
		chromedp.WaitVisible(chromedp.CSS("#download-state")),
		chromedp.SendKeys(chromedp.CSS("#download-reason"), "Incident 42: compare the state with the cloud"),
		chromedp.SendKeys(chromedp.CSS("#download-password"), "correct horse battery staple"),
		chromedp.Click(chromedp.CSS("#download-state")),
	)
	var body []byte
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		if len(files) == 1 && !strings.HasSuffix(files[0], ".crdownload") {
			if body, _ = os.ReadFile(files[0]); len(body) > 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no download arrived: %v", files)
		}
	}
	if !strings.Contains(string(body), "in-the-state") || !strings.Contains(string(body), `"serial"`) {
		t.Fatalf("the download is not the raw state:\n%.400s", body)
	}
	if n := s.sensitiveDownloads(t, m); n != 1 {
		t.Fatalf("the download was audited %d times, want once", n)
	}
}
