package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cairnhq/cairn/api/github/githubfake"
)

// forkHost is the real binaries as the fake code host's app, with check
// runs, one installation bound to a member's organization and a workspace
// tracking its repository's main branch.
type forkHost struct {
	*Stack
	fake   *githubfake.Server
	checks *githubfake.Checks
	m      member
	ws     string
}

const forkHostRepo, forkHostInstallation = 9401, 4401

// forkConfig is what a fork's pull request proposes.
const forkConfig = `resource "terraform_data" "fork" {
  input = "from a fork"
}
`

func startForkHost(t *testing.T, forks string, env ...string) *forkHost {
	t.Helper()
	fake := githubfake.Start(t)
	checks := githubfake.AttachChecks(fake)
	fake.AddRepository(githubfake.Repository{ID: forkHostRepo, Owner: "acme", Name: "infra"})
	fake.AddInstallation(githubfake.Installation{ID: forkHostInstallation, AccountLogin: "acme", Repositories: []int64{forkHostRepo}})
	s := runsStack(t, append(codeHostEnv(t, fake), env...)...)
	h := &forkHost{Stack: s, fake: fake, checks: checks, m: s.newMember(t, "forks")}
	s.installApp(t, h.m, fake, forkHostInstallation)
	h.ws = s.createWorkspace(t, h.m, "forks", "us")
	if st := s.apiJSON(t, http.MethodPut, "/v1/workspaces/"+h.ws+"/source", map[string]any{"repository_id": forkHostRepo,
		"tracked_branch": "main", "working_directory": "infra", "fork_pull_requests": forks}, nil,
		h.m.mutate(uniqueKey("source"))...); st != http.StatusCreated {
		t.Fatalf("source settings: %d", st)
	}
	return h
}

// forkPull delivers a pull request from mallory's fork and returns its
// head commit.
func (h *forkHost) forkPull(t *testing.T, number int) string {
	t.Helper()
	head := h.fake.Commit(forkHostRepo, fmt.Sprintf("pull/%d", number), fmt.Sprintf("A fork's change %d", number),
		map[string]string{"infra/main.tf": forkConfig})
	d := githubfake.NewDelivery("pull_request", h.fake.PullRequest(t, forkHostInstallation, forkHostRepo, githubfake.PullOptions{
		Number: number, Base: "main", HeadRef: "patch", HeadSHA: head, Fork: true, ForkOwner: "mallory"}))
	req, err := d.Request(context.Background(), h.APIURL+"/v1/github/webhooks", e2eWebhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := h.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("pull request delivery: %d", resp.StatusCode)
	}
	return head
}

type heldView struct {
	ID             string  `json:"id"`
	Status         string  `json:"status"`
	HeldReason     *string `json:"held_reason"`
	HeadSHA        string  `json:"head_sha"`
	HeadRepository *string `json:"head_repository"`
	RunID          *string `json:"run_id"`
}

// waitHeld waits until the pull request with head sha is held.
func (h *forkHost) waitHeld(t *testing.T, head string) heldView {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var held []heldView
		if st := h.apiJSON(t, http.MethodGet, "/v1/workspaces/"+h.ws+"/held-source-ingestions", nil, &held, h.m.cookie()...); st != http.StatusOK {
			t.Fatalf("held list: %d", st)
		}
		for _, v := range held {
			if v.HeadSHA == head {
				return v
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pull request at %s was never held: %+v", head, held)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitNeutralCheck waits for the held ingestion's neutral check and
// returns it.
func (h *forkHost) waitNeutralCheck(t *testing.T, head, ingestionID string) githubfake.CheckRun {
	t.Helper()
	c := waitCheck(t, h.checks, head, ingestionID, func(c githubfake.CheckRun) bool { return c.Status == "completed" })
	if c.Conclusion != "neutral" || c.DetailsURL != h.DashboardURL+"/workspaces/"+h.ws+"/pull-requests/"+ingestionID {
		t.Fatalf("held check: %+v", c)
	}
	return c
}

func (h *forkHost) planHeld(t *testing.T, header []string, id, sha string) (int, []byte) {
	t.Helper()
	return call(t, h.Client, http.MethodPost, h.APIURL+"/v1/source-ingestions/"+id+"/actions/plan",
		mustJSON(map[string]string{"commit_sha": sha}), append(header, "Idempotency-Key", uniqueKey("plan"))...)
}

// TestForkPullRequestWaitsForAPersonToPlanIt: with the default setting a
// pull request from a fork starts no run; its ingestion is held and a
// neutral check on the head commit links to the held pull request's page.
// The workspace page lists it; a reader sees Plan this commit disabled
// with the reason and is refused by the API (an agent's refusal is
// api/github's TestForkPullRequestIsHeldUntilAPersonPlansIt). The owner
// plans it from the page in Chromium: the speculative
// run plans exactly that commit, pins who approved it, and the audit trail
// names the owner.
func TestForkPullRequestWaitsForAPersonToPlanIt(t *testing.T) {
	t.Parallel()
	h := startForkHost(t, "hold")
	head := h.forkPull(t, 17)
	held := h.waitHeld(t, head)
	if held.HeldReason == nil || *held.HeldReason != "fork_pull_request" || held.HeadRepository == nil ||
		*held.HeadRepository != "mallory/infra" {
		t.Fatalf("held: %+v", held)
	}
	h.waitNeutralCheck(t, head, held.ID)
	if n := h.runCount(t); n != 0 {
		t.Fatalf("a held fork started %d runs", n)
	}

	reader := h.onlyMemberOf(t, h.m, "forkreader", "reader")
	if st, body := h.planHeld(t, reader.cookie(), held.ID, head); st != http.StatusForbidden {
		t.Fatalf("a reader planned: %d %s", st, body)
	}
	if n := h.runCount(t); n != 0 {
		t.Fatalf("a refused plan started %d runs", n)
	}

	ctx := newBrowser(t)
	signInAs(t, ctx, h.Stack, reader.email)
	page := h.DashboardURL + "/workspaces/" + h.ws + "/pull-requests/" + held.ID
	browse(t, ctx, "the reader opens the held pull request", chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#plan-commit")))
	waitText(t, ctx, "#plan-needs", "run:create")
	if n := count(t, ctx, "#plan-commit[disabled]"); n != 1 {
		t.Fatal("Plan this commit is enabled for a reader")
	}

	ctx = newBrowser(t)
	signInAs(t, ctx, h.Stack, h.m.email)
	browse(t, ctx, "the owner opens the workspace", chromedp.Navigate(h.DashboardURL+"/workspaces/"+h.ws),
		chromedp.WaitVisible(chromedp.CSS("#held-pull-requests")))
	waitText(t, ctx, "#held-pull-requests", "mallory/infra")
	browse(t, ctx, "opening the held pull request", chromedp.Click(chromedp.CSS("#held-pull-requests a")),
		chromedp.WaitVisible(chromedp.CSS("#pr-head-sha")))
	waitText(t, ctx, "#pr-head-sha", head)
	waitText(t, ctx, "#pr-number", "#17")
	waitText(t, ctx, "#pr-fork", "mallory/infra")
	waitText(t, ctx, "#pr-reason", "fork_pull_request")
	screenshot(t, ctx, "held-pull-request")
	browse(t, ctx, "planning this commit", chromedp.Click(chromedp.CSS("#plan-commit")),
		chromedp.WaitVisible(chromedp.CSS("p.notice")))
	waitText(t, ctx, "p.notice", "Planned")

	r := h.newestRun(t, h.m, h.ws, 3*time.Minute, status("planned_and_finished", "errored", "policy_soft_failed"))
	if r.Status != "planned_and_finished" || r.Kind != "speculative" {
		t.Fatalf("the planned fork: %+v\n%s", r, h.logsOf(t, h.m, r.ID))
	}
	var me struct {
		User struct{ ID string } `json:"user"`
	}
	h.apiJSON(t, http.MethodGet, "/api/auth/get-session", nil, &me, h.m.cookie()...)
	var review struct {
		Provenance struct {
			CommitSHA      string  `json:"commit_sha"`
			Fork           bool    `json:"fork"`
			PlanApprovedBy *string `json:"plan_approved_by"`
		} `json:"source_provenance"`
	}
	h.apiJSON(t, http.MethodGet, "/v1/runs/"+r.ID, nil, &review, h.m.cookie()...)
	if review.Provenance.CommitSHA != head || !review.Provenance.Fork || review.Provenance.PlanApprovedBy == nil ||
		*review.Provenance.PlanApprovedBy != me.User.ID || me.User.ID == "" {
		t.Fatalf("the run's source: %+v (owner %s)", review.Provenance, me.User.ID)
	}
	var events []auditEvent
	h.apiJSON(t, http.MethodGet, "/v1/audit-events?action=source_ingestion.plan_approved", nil, &events, h.m.cookie()...)
	if len(events) != 1 || events[0].Actor.ID != me.User.ID || events[0].Target.ID != held.ID ||
		events[0].Evidence["commit_sha"] != head || events[0].Evidence["fork_owner"] != "mallory" {
		t.Fatalf("audit events: %+v", events)
	}
	// The run's own check ends success; the held one stays neutral.
	waitCheck(t, h.checks, head, r.ID, func(c githubfake.CheckRun) bool { return c.Conclusion == "success" })
	h.waitNeutralCheck(t, head, held.ID)
	browse(t, ctx, "the page links the run", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#pr-run")))
	waitText(t, ctx, "#pr-approved-by", "forks")
}

// TestForkPlansAreThrottledPerRepositoryEndToEnd: with fork plans allowed
// and CAIRN_FORK_RUNS_PER_HOUR=1, the first fork pull request of the hour
// plans as a speculative run; the second is held as fork_runs_throttled
// with a neutral check, and starts no run.
func TestForkPlansAreThrottledPerRepositoryEndToEnd(t *testing.T) {
	t.Parallel()
	h := startForkHost(t, "plan", "CAIRN_FORK_RUNS_PER_HOUR=1")
	first := h.forkPull(t, 21)
	r := h.newestRun(t, h.m, h.ws, 3*time.Minute, status("planned_and_finished", "errored", "policy_soft_failed"))
	if r.Status != "planned_and_finished" || r.Kind != "speculative" {
		t.Fatalf("the first fork: %+v\n%s", r, h.logsOf(t, h.m, r.ID))
	}
	waitCheck(t, h.checks, first, r.ID, func(c githubfake.CheckRun) bool { return c.Conclusion == "success" })
	second := h.forkPull(t, 22)
	held := h.waitHeld(t, second)
	if held.HeldReason == nil || *held.HeldReason != "fork_runs_throttled" || held.RunID != nil {
		t.Fatalf("the second fork: %+v", held)
	}
	c := h.waitNeutralCheck(t, second, held.ID)
	if !strings.Contains(c.Summary, "fork_runs_throttled") {
		t.Fatalf("throttled check: %+v", c)
	}
	if n := h.runCount(t); n != 1 {
		t.Fatalf("%d runs, want only the first fork's", n)
	}
}

// runCount is the workspace's number of runs.
func (h *forkHost) runCount(t *testing.T) int {
	t.Helper()
	var runs []runView
	h.apiJSON(t, http.MethodGet, "/v1/runs?workspace_id="+h.ws+"&limit=100", nil, &runs, h.m.cookie()...)
	return len(runs)
}

// TestInstallationReturnsToTheCodeHostPage: the whole installation round
// trip through the dashboard: Install on the organization's code-host page
// sends the browser to the provider with a signed state, the provider's
// setup URL (the dashboard's control-plane callback) binds the
// installation and redirects back to the dashboard, where the code-host
// page shows the connected installation and its repository.
func TestInstallationReturnsToTheCodeHostPage(t *testing.T) {
	t.Parallel()
	fake := githubfake.Start(t)
	fake.AddRepository(githubfake.Repository{ID: 9501, Owner: "acme", Name: "network"})
	fake.AddInstallation(githubfake.Installation{ID: 4501, AccountLogin: "acme", Repositories: []int64{9501}})
	s := fakeAppStack(t, fake)
	m := s.newMember(t, "installer")
	d := signInToDashboard(t, s, m.email)
	page := d.page(t, "/organization/code-host")
	csrf := regexp.MustCompile(`name="csrf_token" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	if csrf == nil || !strings.Contains(page, `id="install"`) || !strings.Contains(page, "not installed") {
		t.Fatalf("code-host page before installing:\n%s", page)
	}
	req, _ := http.NewRequest(http.MethodPost, s.DashboardURL+"/organization/code-host/install",
		strings.NewReader(url.Values{"csrf_token": {csrf[1]}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.DashboardURL)
	resp, err := d.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	install, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(install.String(), fake.URL+"/github-apps/cairn-e2e/installations/new") {
		t.Fatalf("Install went to %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	// The provider sends the browser to the setup URL.
	q := url.Values{"state": {install.Query().Get("state")}, "installation_id": {"4501"}, "setup_action": {"install"},
		"code": {fake.InstallerCode(4501)}}
	resp, err = d.client.Get(s.DashboardURL + "/api/control-plane/v1/github/installations/callback?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != s.DashboardURL+"/organization/code-host?installation=connected" {
		t.Fatalf("callback answered %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, err = d.client.Get(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page = string(raw)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the page the callback returns to: %d\n%s", resp.StatusCode, page)
	}
	for _, want := range []string{`id="code-host-notice"`, `<span class="status s-connected">connected</span>`,
		`<code id="code-host-account">acme</code>`, `<code>acme/network</code>`} {
		if !strings.Contains(page, want) {
			t.Fatalf("code-host page lacks %s:\n%s", want, page)
		}
	}
}
