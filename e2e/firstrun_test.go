package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cairnhq/cairn/e2e/devstack"
)

// firstRunConfig is what the new user's CLI uploads: terraform_data only,
// so the plan has unknowns, nested values and outputs to show.
const firstRunConfig = `
resource "terraform_data" "web" {
  input = {
    name  = "web-1"
    tags  = { team = "platform", env = "dev" }
    ports = [80, 443]
  }
}

resource "terraform_data" "db" {
  input = "postgres"
}

output "web_name" {
  value = terraform_data.web.output.name
}
`

// evalString evaluates an expression in the page.
func evalString(t *testing.T, ctx context.Context, js string) string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	if err != nil {
		t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

// TestDashboardFirstRunWalk walks a brand-new user through the browser
// only: sign up, create the organization and a workspace, mint a CLI token
// on the page, let the real tofu (cloud block copied from the page) plan
// the configuration (a speculative proposal the page does not offer to
// run), start a run from the page with the configuration's archive, read
// the plan's attribute diff on the Changes tab, approve, and see the applied state version with
// its outputs and the downloads section. No API call is made outside the
// browser except the CLI's own.
func TestDashboardFirstRunWalk(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	ctx := newBrowserWithin(t, walkTimeout)
	suffix := time.Now().UnixNano() % 1_000_000_000
	email := fmt.Sprintf("new-%d@example.com", suffix)
	slug := fmt.Sprintf("acme-%d", suffix)

	browse(t, ctx, "signing up",
		chromedp.Navigate(s.DashboardURL+"/sign-up"),
		chromedp.WaitVisible(chromedp.CSS("#email")),
		chromedp.SendKeys(chromedp.CSS("#name"), "Ada Lovelace"),
		chromedp.SendKeys(chromedp.CSS("#email"), email),
		chromedp.SendKeys(chromedp.CSS("#password"), "correct horse battery staple"),
	)
	screenshot(t, ctx, "first-run-sign-up")
	browse(t, ctx, "creating the account",
		chromedp.Click(chromedp.CSS("form button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#create-organization")),
	)
	waitText(t, ctx, "h1", "Create your organization")
	browse(t, ctx, "naming the organization",
		chromedp.SendKeys(chromedp.CSS("#org-name"), "Acme"),
		chromedp.SendKeys(chromedp.CSS("#org-slug"), slug),
	)
	screenshot(t, ctx, "first-run-create-organization")
	browse(t, ctx, "creating the organization",
		chromedp.Click(chromedp.CSS("#create-organization button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#create-workspace")),
	)
	waitText(t, ctx, "h1", "Get started with Acme")
	browse(t, ctx, "creating the workspace",
		chromedp.SendKeys(chromedp.CSS("#ws-name"), "demo"),
		chromedp.Click(chromedp.CSS("#create-workspace button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#connect-and-run")),
		chromedp.Click(chromedp.CSS("#connect-and-run")),
		chromedp.WaitVisible(chromedp.CSS("#mint-token")),
	)
	block := evalString(t, ctx, "document.querySelector('#cloud-block').textContent")
	for _, want := range []string{`hostname     = "` + s.APIHost + `"`, `organization = "` + slug + `"`, `name = "demo"`} {
		if !strings.Contains(block, want) {
			t.Fatalf("cloud block lacks %s:\n%s", want, block)
		}
	}
	browse(t, ctx, "minting a CLI token", chromedp.Click(chromedp.CSS("#mint-token")), chromedp.WaitVisible(chromedp.CSS("#cli-token")))
	token := evalString(t, ctx, "document.querySelector('#cli-token').value")
	if !strings.HasPrefix(token, "cut_") {
		t.Fatalf("the page showed no CLI token: %q", token)
	}
	screenshot(t, ctx, "first-run-connect-cli")
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	ws := regexp.MustCompile(`ws_[a-z0-9]+`).FindString(loc)
	if ws == "" {
		t.Fatalf("no workspace in %s", loc)
	}
	start := s.DashboardURL + "/workspaces/" + ws + "/start"
	// Coming back never shows it again.
	browse(t, ctx, "opening the page again", chromedp.Navigate(start), chromedp.WaitVisible(chromedp.CSS("#mint-token")))
	if html := evalString(t, ctx, "document.body.innerHTML"); strings.Contains(html, token) {
		t.Fatal("the CLI token is shown again after a reload")
	}

	// The CLI, configured with exactly what the page showed.
	dir, home := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(block+firstRunConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	rc := filepath.Join(home, "tofurc")
	if err := os.WriteFile(rc, []byte(fmt.Sprintf("credentials %q {\n  token = %q\n}\n", s.APIHost, token)), 0o600); err != nil {
		t.Fatal(err)
	}
	tf := tofuRun{bin: tofuBinary(t), dir: dir, env: []string{"HOME=" + home, "TF_CLI_CONFIG_FILE=" + rc, "SSL_CERT_FILE=" + s.TLS.Bundle,
		"TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1", "TF_LOG="}}
	tf.run(t, "init")
	if out := tf.run(t, "plan"); !strings.Contains(out, "2 to add") {
		t.Fatalf("the CLI's plan did not run in Cairn:\n%s", out)
	}

	// The CLI's plan is speculative: a proposal New run never plans, so the
	// page still offers no configuration and says how to give it one.
	browse(t, ctx, "opening New run after the CLI's plan",
		chromedp.Navigate(start),
		chromedp.WaitVisible(chromedp.CSS("#start-run")),
		chromedp.WaitVisible(chromedp.CSS("#no-configuration")),
	)
	// New run from the page with the same configuration as an archive.
	archive := filepath.Join(t.TempDir(), "configuration.tar.gz")
	if err := os.WriteFile(archive, devstack.TarGz(map[string]string{"main.tf": block + firstRunConfig}), 0o600); err != nil {
		t.Fatal(err)
	}
	browse(t, ctx, "starting a run",
		chromedp.SetUploadFiles(chromedp.CSS("#run-archive"), []string{archive}),
		chromedp.SendKeys(chromedp.CSS("#run-message"), "First apply from the dashboard"),
		chromedp.Click(chromedp.CSS("#start-run")),
		chromedp.WaitVisible(chromedp.CSS("#stage-Plan")),
	)
	waitText(t, ctx, "h1", "First apply from the dashboard")
	waitText(t, ctx, "#run-status", "awaiting approval")
	browse(t, ctx, "opening Changes",
		chromedp.Click(chromedp.CSS("#stage-Plan > summary")),
		chromedp.Click(chromedp.CSS("details.changes > summary")),
		chromedp.WaitVisible(chromedp.CSS(".resource-diff")),
	)
	changes := evalString(t, ctx, "document.querySelector('#changes').innerText")
	for _, want := range []string{"terraform_data.web will be created", `resource "terraform_data" "web"`,
		"(known after apply)", `"platform"`, "Plan: 2 to add, 0 to change, 0 to destroy."} {
		if !strings.Contains(changes, want) {
			t.Errorf("the Changes tab lacks %q:\n%s", want, changes)
		}
	}
	if strings.Contains(changes, "cairn:") || strings.Contains(changes, `{"`) {
		t.Errorf("the Changes tab shows raw JSON:\n%s", changes)
	}
	screenshot(t, ctx, "run-changes-tab")
	browse(t, ctx, "approving", chromedp.Click(chromedp.CSS("#approve")))
	waitText(t, ctx, "#run-status", "applied")
	waitText(t, ctx, "#state-version", "Published state version")
	waitText(t, ctx, "#outputs", "web_name")
	waitText(t, ctx, "#outputs", `"web-1"`)
	for _, stage := range []string{"Plan", "Policy", "Approval", "Apply"} {
		if d := evalString(t, ctx, "document.querySelector('#stage-"+stage+" .stage-time').textContent"); d == "—" || d == "" {
			t.Errorf("stage %s shows no duration", stage)
		}
	}
	browse(t, ctx, "downloads", chromedp.WaitVisible(chromedp.CSS("#downloads #download-redacted")))
	screenshot(t, ctx, "run-applied-downloads")
	if loc, _ = chromedp.Run(ctx, chromedp.Location()); !regexp.MustCompile(`/runs/run_`).MatchString(loc) {
		t.Errorf("not on a run page: %s", loc)
	}
}

// TestDashboardFirstRunBehindAClosedGate: on an installation whose launch
// gate was never opened, a new account still creates its organization in
// the browser, and /welcome then says the organization is not admitted and
// how an operator admits it, with the refusal's 503 and Retry-After,
// instead of a bare "Unavailable"; admission itself stays closed.
func TestDashboardFirstRunBehindAClosedGate(t *testing.T) {
	t.Parallel()
	s := StartStack(t, WithoutLaunchControl())
	ctx := newBrowser(t)
	suffix := time.Now().UnixNano() % 1_000_000_000
	browse(t, ctx, "signing up",
		chromedp.Navigate(s.DashboardURL+"/sign-up"),
		chromedp.WaitVisible(chromedp.CSS("#email")),
		chromedp.SendKeys(chromedp.CSS("#name"), "Grace"),
		chromedp.SendKeys(chromedp.CSS("#email"), fmt.Sprintf("closed-%d@example.com", suffix)),
		chromedp.SendKeys(chromedp.CSS("#password"), "correct horse battery staple"),
		chromedp.Click(chromedp.CSS("form button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#create-organization")),
		chromedp.SendKeys(chromedp.CSS("#org-name"), "Closed"),
		chromedp.SendKeys(chromedp.CSS("#org-slug"), fmt.Sprintf("closed-%d", suffix)),
		chromedp.Click(chromedp.CSS("#create-organization button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#welcome[data-step=closed]")),
	)
	waitText(t, ctx, "#welcome", "cairn-api launch open-gate")
	if nav := evalString(t, ctx, "String(document.querySelectorAll('nav[aria-label=Main]').length)"); nav != "0" {
		t.Error("the closed-gate page offers organization navigation")
	}
	status, err := chromedp.Run(ctx, chromedp.Evaluate[int](`(async () => (await fetch('/welcome')).status)()`, chromedp.EvalAwaitPromise))
	if err != nil || status != 503 {
		t.Errorf("/welcome behind a closed gate answered %d (%v), want 503", status, err)
	}
	screenshot(t, ctx, "first-run-closed-gate")
}
