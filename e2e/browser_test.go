package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/cairnhq/cairn/e2e/devstack"
)

// browserTimeout bounds everything one test does in its browser, the start
// included, so a page that never settles fails that test rather than the whole
// package at go test's -timeout. A walk that also runs the real CLI and waits
// for whole runs in between takes walkTimeout instead: under CI's load a tofu
// init and remote plan alone took most of two minutes.
const (
	browserTimeout = 2 * time.Minute
	walkTimeout    = 6 * time.Minute
)

// The sizes the dashboard is looked at in: a laptop window and a phone.
const (
	desktopWidth, desktopHeight = 1280, 900
	phoneWidth, phoneHeight     = 390, 844
)

// newBrowser starts a headless Chromium with a fresh profile for this test and
// returns the context of its one tab. The page's uncaught exceptions, console
// errors and warnings, and the browser's own error log (failed loads, CSP
// violations) go to t.Log; an uncaught exception fails the test when it ends.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	return newBrowserWithin(t, browserTimeout)
}

// newBrowserWithin is newBrowser with its own bound on the whole test.
func newBrowserWithin(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	path, err := devstack.ChromiumPath()
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		// Chromium's sandbox needs user namespaces or a setuid helper, and
		// refuses to run as root without it; the pages are our own.
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.WindowSize(desktopWidth, desktopHeight),
		// No UserDataDir: the allocator then makes a fresh temporary profile
		// and, after Chromium exits, kills the helper processes still
		// writing to it before removing it, which a t.TempDir would not.
	)
	timeoutCtx, cancelTimeout := context.WithTimeout(context.Background(), timeout)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(timeoutCtx, opts...)
	ctx, cancelBrowser := chromedp.NewContext(allocCtx)
	page := &pageLog{t: t}
	t.Cleanup(func() {
		if ctx.Err() == nil {
			page.failOnExceptions(ctx)
		}
		cancelBrowser()
		cancelAlloc()
		cancelTimeout()
		page.close()
	})
	started := time.Now()
	// Listen starts the browser and opens the tab, and calls record on the
	// goroutine that reads the tab's messages, so an event the page sent
	// before the answer to a command is recorded before that command returns.
	if err := chromedp.Listen(ctx, page.record); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	t.Logf("chromium started in %s", time.Since(started).Round(time.Millisecond))
	// Headless Chromium still takes room for a window's toolbars from
	// --window-size; pin the page's own viewport so screenshots are the same
	// size on every machine.
	if err := viewport(ctx, desktopWidth, desktopHeight); err != nil {
		t.Fatal(err)
	}
	return context.WithValue(ctx, pageLogKey{}, page)
}

// screenshot saves the whole page, not only the part in the window, as
// <name>.png in the test's artifact directory: kept under -outputdir when
// go test runs with -artifacts, removed with the test otherwise.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100 is lossless PNG
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(t.ArtifactDir(), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatalf("saving screenshot %s: %v", name, err)
	}
	t.Logf("screenshot %s: %s", name, path)
}

// viewport resizes the page's layout viewport, as a narrower window would, so
// media queries and the layout respond to it; the page is not reloaded.
func viewport(ctx context.Context, width, height int) error {
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(int64(width), int64(height))); err != nil {
		return fmt.Errorf("setting the viewport to %dx%d: %w", width, height, err)
	}
	return nil
}

// pageLogKey finds a browser's pageLog in the context newBrowser returns.
type pageLogKey struct{}

// pageLog forwards what a page reports to the test's log and keeps its
// uncaught exceptions for the end of the test.
type pageLog struct {
	t          *testing.T
	mu         sync.Mutex
	closed     bool // the test is ending: t.Log must not be called any more
	exceptions []string
}

// record runs on the browser connection's reading goroutine, so it only
// formats and logs.
func (p *pageLog) record(ev any) {
	var line string
	exception := false
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		line, exception = exceptionText(ev.ExceptionDetails), true
	case *runtime.EventConsoleAPICalled:
		if ev.Type != runtime.ConsoleAPICalledTypeError && ev.Type != runtime.ConsoleAPICalledTypeWarning &&
			ev.Type != runtime.ConsoleAPICalledTypeAssert {
			return
		}
		line = "console." + string(ev.Type) + ": " + consoleArgs(ev.Args)
	case *log.EventEntryAdded:
		if ev.Entry == nil || ev.Entry.Level != log.EntryLevelError {
			return
		}
		line = string(ev.Entry.Source) + " error: " + ev.Entry.Text
		if ev.Entry.URL != "" {
			line += " (" + ev.Entry.URL + ")"
		}
	default:
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	if exception {
		p.exceptions = append(p.exceptions, line)
	}
	p.t.Log("browser: " + line)
}

// takeExceptions returns the uncaught exceptions recorded so far and forgets
// them. A cheap command first makes sure every event the page sent until now
// has been recorded.
func (p *pageLog) takeExceptions(ctx context.Context) []string {
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void]("0")); err != nil {
		p.t.Logf("browser: flushing page events: %v", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	taken := p.exceptions
	p.exceptions = nil
	return taken
}

// failOnExceptions fails the test if the page threw an exception that nothing
// caught.
func (p *pageLog) failOnExceptions(ctx context.Context) {
	p.t.Helper()
	if thrown := p.takeExceptions(ctx); len(thrown) > 0 {
		p.t.Errorf("the page threw %d uncaught exception(s):\n%s", len(thrown), strings.Join(thrown, "\n"))
	}
}

func (p *pageLog) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
}

// expectNoExceptions fails the test now if the page in ctx has thrown an
// uncaught exception, rather than when the test ends.
func expectNoExceptions(t *testing.T, ctx context.Context) {
	t.Helper()
	pageLogOf(t, ctx).failOnExceptions(ctx)
}

func pageLogOf(t *testing.T, ctx context.Context) *pageLog {
	t.Helper()
	page, ok := ctx.Value(pageLogKey{}).(*pageLog)
	if !ok {
		t.Fatal("the context does not come from newBrowser")
	}
	return page
}

// exceptionText is the error and its message, as the DevTools console's first
// line shows it, with where it was thrown.
func exceptionText(d *runtime.ExceptionDetails) string {
	if d == nil {
		return "exception"
	}
	text := d.Text
	if d.Exception != nil && d.Exception.Description != "" {
		first, _, _ := strings.Cut(d.Exception.Description, "\n")
		text += " " + first
	}
	if d.URL != "" {
		text += " at " + d.URL
	}
	return text
}

// consoleArgs renders the arguments of a console call: strings as they are,
// other values by their description or JSON.
func consoleArgs(args []*runtime.RemoteObject) string {
	parts := make([]string, 0, len(args))
	for _, a := range args {
		var s string
		switch {
		case a.Type == runtime.RemoteObjectTypeString && json.Unmarshal(a.Value, &s) == nil:
		case a.Description != "":
			s = a.Description
		case len(a.Value) > 0:
			s = string(a.Value)
		default:
			s = string(a.Type)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

// TestDashboardServesInABrowser is the smoke test of the browser harness: a
// real Chromium loads the dashboard's front page from a real cairn-bff, the
// page runs without throwing, and it lays out at laptop and phone widths.
func TestDashboardServesInABrowser(t *testing.T) {
	t.Parallel()
	s := StartStack(t)
	ctx := newBrowser(t)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(s.DashboardURL+"/"),
		chromedp.WaitVisible(chromedp.CSS("body")),
	); err != nil {
		t.Fatalf("loading the dashboard: %v", err)
	}
	title, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(title, "Cairn") {
		t.Errorf("page title %q does not name Cairn", title)
	}
	expectNoExceptions(t, ctx)
	screenshot(t, ctx, "front-page")

	if err := viewport(ctx, phoneWidth, phoneHeight); err != nil {
		t.Fatal(err)
	}
	width, err := chromedp.Run(ctx, chromedp.Evaluate[int]("window.innerWidth"))
	if err != nil {
		t.Fatal(err)
	}
	if width != phoneWidth {
		t.Errorf("window.innerWidth = %d after switching to a phone viewport, want %d", width, phoneWidth)
	}
	screenshot(t, ctx, "front-page-phone")
}

// TestBrowserReportsPageExceptions checks the harness itself: an exception a
// page throws and nothing catches is recorded, so dashboard tests fail on it.
func TestBrowserReportsPageExceptions(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(`<!doctype html><title>t</title><script>throw new Error("boom from the page")</script>`))
	}))
	t.Cleanup(srv.Close)
	ctx := newBrowser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL)); err != nil {
		t.Fatal(err)
	}
	thrown := pageLogOf(t, ctx).takeExceptions(ctx)
	if len(thrown) != 1 || !strings.Contains(thrown[0], "boom from the page") {
		t.Fatalf("recorded exceptions %q, want the page's one", thrown)
	}
}
