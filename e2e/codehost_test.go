package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/github/githubfake"
)

const codeHostSecret = "e2e-webhook-secret-0123456789"

// codeHostStack is the real binaries configured as the app the fake code
// host knows, with one installation bound to a member's organization and a
// workspace tracking its repository.
type codeHostStack struct {
	*Stack
	fake        *githubfake.Server
	m           member
	workspaceID string
}

const codeHostRepo, codeHostInstallation = 9101, 4101

func startCodeHost(t *testing.T) *codeHostStack {
	t.Helper()
	fake := githubfake.Start(t)
	s := runsStack(t, "CAIRN_GITHUB_APP_ID="+fmt.Sprint(fake.AppID), "CAIRN_GITHUB_PRIVATE_KEY="+string(fake.KeyPEM),
		"CAIRN_GITHUB_WEBHOOK_SECRET="+codeHostSecret, "CAIRN_GITHUB_API_URL="+fake.URL, "CAIRN_GITHUB_APP_SLUG=cairn-e2e",
		"CAIRN_GITHUB_CLIENT_ID="+githubfake.ClientID, "CAIRN_GITHUB_CLIENT_SECRET="+githubfake.ClientSecret)
	c := &codeHostStack{Stack: s, fake: fake, m: s.newMember(t, "codehost")}
	fake.AddRepository(githubfake.Repository{ID: codeHostRepo, Owner: "acme", Name: "infra"})
	fake.AddInstallation(githubfake.Installation{ID: codeHostInstallation, AccountLogin: "acme", Repositories: []int64{codeHostRepo}})

	var started struct {
		InstallURL string `json:"install_url"`
	}
	if st := s.apiJSON(t, http.MethodPost, "/v1/github/installations/start", nil, &started, c.m.mutate(uniqueKey("install"))...); st != http.StatusCreated {
		t.Fatalf("start installation: %d", st)
	}
	u, err := url.Parse(started.InstallURL)
	if err != nil {
		t.Fatal(err)
	}
	q := url.Values{"state": {u.Query().Get("state")}, "installation_id": {fmt.Sprint(codeHostInstallation)}, "setup_action": {"install"},
		"code": {fake.InstallerCode(codeHostInstallation)}}
	req, _ := http.NewRequest(http.MethodGet, s.APIURL+"/v1/github/installations/callback?"+q.Encode(), nil)
	cookie := c.m.cookie()
	req.Header.Set(cookie[0], cookie[1])
	noFollow := &http.Client{Transport: s.Client.Transport, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("installation callback: %d", resp.StatusCode)
	}
	c.workspaceID = s.createWorkspace(t, c.m, "codehost", "us")
	if st := s.apiJSON(t, http.MethodPut, "/v1/workspaces/"+c.workspaceID+"/source", map[string]any{
		"repository_id": codeHostRepo, "tracked_branch": "main", "working_directory": "infra", "trigger_paths": []string{"infra/**"},
	}, nil, c.m.mutate(uniqueKey("source"))...); st != http.StatusCreated {
		t.Fatalf("source settings: %d", st)
	}
	return c
}

// deliver posts a signed delivery to the API as the provider does.
func (c *codeHostStack) deliver(t *testing.T, event string, body []byte) (int, []byte) {
	t.Helper()
	d := githubfake.NewDelivery(event, body)
	req, err := d.Request(context.Background(), c.APIURL+"/v1/github/webhooks", codeHostSecret)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf strings.Builder
	_, _ = fmt.Fprint(&buf, resp.Status)
	return resp.StatusCode, []byte(buf.String())
}

func (c *codeHostStack) runCount(t *testing.T) int {
	t.Helper()
	var runs []runView
	c.apiJSON(t, http.MethodGet, "/v1/runs?workspace_id="+c.workspaceID+"&limit=100", nil, &runs, c.m.cookie()...)
	return len(runs)
}

const codeHostConfig = `resource "terraform_data" "greeting" {
  input = "hello from a push"
}
`

// TestPushPlansWaitsAndApplies: a signed push to the tracked branch is
// planned in a real sandbox from the commit's archive, waits for
// approval, and applies; a pull request gets a speculative run; a push
// touching no trigger path creates nothing.
func TestPushPlansWaitsAndApplies(t *testing.T) {
	t.Parallel()
	c := startCodeHost(t)
	sha := c.fake.Commit(codeHostRepo, "main", "Greet from a push", map[string]string{
		"infra/main.tf": codeHostConfig, "README.md": "# infra\n"})
	if st, body := c.deliver(t, "push", c.fake.Push(t, codeHostInstallation, codeHostRepo, githubfake.PushOptions{
		Branch: "main", Before: strings.Repeat("3", 40), After: sha, Paths: [][]string{{"infra/main.tf"}}})); st != http.StatusOK {
		t.Fatalf("push: %d %s", st, body)
	}
	r := c.newestRun(t, c.m, c.workspaceID, 2*time.Minute, status("awaiting_approval", "errored", "planned_and_finished"))
	if r.Status != "awaiting_approval" || r.Kind != "plan_and_apply" {
		t.Fatalf("tracked run: %+v\n%s", r, c.logsOf(t, c.m, r.ID))
	}
	var review struct {
		Source     string `json:"source"`
		Provenance *struct {
			CommitSHA     string `json:"commit_sha"`
			CommitMessage string `json:"commit_message"`
			Repository    string `json:"repository"`
		} `json:"source_provenance"`
	}
	c.apiJSON(t, http.MethodGet, "/v1/runs/"+r.ID, nil, &review, c.m.cookie()...)
	if review.Source != "vcs" || review.Provenance == nil || review.Provenance.CommitSHA != sha ||
		review.Provenance.CommitMessage != "Greet from a push" || review.Provenance.Repository != "acme/infra" {
		t.Fatalf("review of the tracked run: %+v", review)
	}
	if st := c.apiJSON(t, http.MethodPost, "/v1/runs/"+r.ID+"/actions/approve", r.binding(), nil, c.m.mutate(uniqueKey("approve"))...); st != http.StatusOK {
		t.Fatalf("approve: %d", st)
	}
	if applied := c.waitRun(t, c.m, r.ID, 2*time.Minute, status("applied", "errored", "recovery_required")); applied.Status != "applied" {
		t.Fatalf("apply: %+v\n%s", applied, c.logsOf(t, c.m, r.ID))
	}
	// The run's operational events crossed the telemetry boundary where
	// their actions happened: each phase finishing, the policy stage.
	for _, want := range [][]string{
		{`"event":"run_phase_finished"`, `"phase":"plan"`, `"outcome":"ok"`},
		{`"event":"run_phase_finished"`, `"phase":"apply"`, `"outcome":"ok"`},
		{`"event":"policy_evaluated"`, `"outcome":"pass"`},
	} {
		if !hasLogLine(c.Logs(), append(want, `"run_id":"`+r.ID+`"`)...) {
			t.Errorf("no log line with %v for %s", want, r.ID)
		}
	}

	head := c.fake.Commit(codeHostRepo, "feature", "Change the greeting", map[string]string{
		"infra/main.tf": strings.Replace(codeHostConfig, "a push", "a pull request", 1)})
	c.fake.SetPullFiles(codeHostRepo, 7, []string{"infra/main.tf"})
	if st, body := c.deliver(t, "pull_request", c.fake.PullRequest(t, codeHostInstallation, codeHostRepo, githubfake.PullOptions{
		Number: 7, Base: "main", HeadRef: "feature", HeadSHA: head})); st != http.StatusOK {
		t.Fatalf("pull request: %d %s", st, body)
	}
	spec := c.newestRun(t, c.m, c.workspaceID, 2*time.Minute, func(v runView) bool { return v.ID != r.ID && v.Kind == "speculative" })
	spec = c.waitRun(t, c.m, spec.ID, 2*time.Minute, status("planned_and_finished", "errored", "policy_soft_failed"))
	if spec.Status != "planned_and_finished" {
		t.Fatalf("speculative run: %+v\n%s", spec, c.logsOf(t, c.m, spec.ID))
	}

	before := c.runCount(t)
	docs := c.fake.Commit(codeHostRepo, "main", "Docs only", map[string]string{"infra/main.tf": codeHostConfig, "README.md": "# more\n"})
	if st, body := c.deliver(t, "push", c.fake.Push(t, codeHostInstallation, codeHostRepo, githubfake.PushOptions{
		Branch: "main", Before: sha, After: docs, Paths: [][]string{{"README.md"}}})); st != http.StatusOK {
		t.Fatalf("docs push: %d %s", st, body)
	}
	time.Sleep(2 * time.Second)
	if after := c.runCount(t); after != before {
		t.Fatalf("a push touching no trigger path created a run (%d → %d)", before, after)
	}
}

// hasLogLine reports whether one line of logs holds every part.
func hasLogLine(logs string, parts ...string) bool {
	for _, line := range strings.Split(logs, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}
