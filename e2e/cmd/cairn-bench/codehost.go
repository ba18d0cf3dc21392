package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cairnhq/cairn/api/github/githubfake"
)

const benchWebhookSecret = "bench-webhook-secret-0123456789"

// panicT is the harness's stand-in for a test in the fake's payload
// helpers: a failure there is a harness bug.
type panicT struct{}

func (panicT) Helper()                           {}
func (panicT) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }
func (panicT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// benchCodeHost measures the code-host app against the fake code host:
// webhook acceptance latency at 32 concurrent signed deliveries (each a
// pull request accepted into a new ingestion and dispatch, in one
// transaction), and push → sandbox start: from the signed push leaving
// the client to the plan attempt's recorded start in its sandbox.
func benchCodeHost(dbURL string, rounds int) error {
	fake, err := githubfake.New()
	if err != nil {
		return err
	}
	defer fake.Close()
	const repo, installation = 9201, 4201
	fake.AddRepository(githubfake.Repository{ID: repo, Owner: "acme", Name: "infra"})
	fake.AddInstallation(githubfake.Installation{ID: installation, AccountLogin: "acme", Repositories: []int64{repo}})
	m, err := startManagedStack(dbURL, "codehost", fmt.Sprintf("CAIRN_GITHUB_APP_ID=%d", fake.AppID),
		"CAIRN_GITHUB_PRIVATE_KEY="+string(fake.KeyPEM), "CAIRN_GITHUB_WEBHOOK_SECRET="+benchWebhookSecret,
		"CAIRN_GITHUB_API_URL="+fake.URL, "CAIRN_GITHUB_APP_SLUG=cairn-bench",
		"CAIRN_GITHUB_CLIENT_ID="+githubfake.ClientID, "CAIRN_GITHUB_CLIENT_SECRET="+githubfake.ClientSecret)
	if err != nil {
		return err
	}
	defer m.stop()
	api, c, session := m.api, m.api.Client, m.session
	var started struct {
		InstallURL string `json:"install_url"`
	}
	if _, err := v1(c, http.MethodPost, api.URL+"/v1/github/installations/start", session, nil, "application/json", &started); err != nil {
		return err
	}
	u, err := url.Parse(started.InstallURL)
	if err != nil {
		return err
	}
	q := url.Values{"state": {u.Query().Get("state")}, "installation_id": {fmt.Sprint(installation)},
		"code": {fake.InstallerCode(installation)}}
	req, _ := http.NewRequest(http.MethodGet, api.URL+"/v1/github/installations/callback?"+q.Encode(), nil)
	req.Header.Set("Cookie", "__Secure-identity.session_token="+session)
	noFollow := &http.Client{Transport: c.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		return fmt.Errorf("installation callback: %d", resp.StatusCode)
	}
	if _, err := v1(c, http.MethodPut, api.URL+"/v1/workspaces/"+m.workspace+"/source", session, jsonBody(map[string]any{
		"repository_id": repo, "tracked_branch": "main", "trigger_paths": []string{"**/*.tf"},
	}), "application/json", nil); err != nil {
		return err
	}
	deliver := func(event string, body []byte) (int, error) {
		d := githubfake.NewDelivery(event, body)
		req, err := d.Request(context.Background(), api.URL+"/v1/github/webhooks", benchWebhookSecret)
		if err != nil {
			return 0, err
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}

	// Acceptance: pull requests whose base is not the tracked branch are
	// recorded without an ingestion; those targeting it are accepted with
	// one. Both go through signature, replay identity and the acceptance
	// transaction; the second also dispatches.
	head := fake.Commit(repo, "feature", "bench", map[string]string{"main.tf": "resource \"terraform_data\" \"x\" {}\n"})
	bodies := make([][]byte, 64)
	for i := range bodies {
		bodies[i] = fake.PullRequest(panicT{}, installation, repo, githubfake.PullOptions{Number: 100000 + i, Base: "release",
			HeadRef: "feature", HeadSHA: head})
	}
	ignored := load("webhook acceptance (recorded, 32 clients)", *concurrency, *duration, func(w, i int) bool {
		st, err := deliver("pull_request", bodies[(w*7+i)%len(bodies)])
		return err == nil && st == http.StatusOK
	})
	report(ignored, result{}, "")

	// Accepted: pull requests targeting the tracked branch, each a new
	// ingestion with its dispatch and audit evidence. Their changed files
	// miss the trigger paths, so the worker reads them and skips, cheaply.
	accepted := make([][]byte, 1500)
	for i := range accepted {
		fake.SetPullFiles(repo, 200000+i, []string{"README.md"})
		accepted[i] = fake.PullRequest(panicT{}, installation, repo, githubfake.PullOptions{Number: 200000 + i, Base: "main",
			HeadRef: "feature", HeadSHA: head})
	}
	var next atomic.Int64
	acc := load("webhook acceptance (ingested, 32 clients)", *concurrency, *duration, func(w, i int) bool {
		st, err := deliver("pull_request", accepted[int(next.Add(1))%len(accepted)])
		return err == nil && st == http.StatusOK
	})
	report(acc, ignored, "")

	// Push → sandbox start, one push at a time.
	var latencies []float64
	before := strings.Repeat("4", 40)
	for r := range rounds {
		sha := fake.Commit(repo, "main", fmt.Sprintf("round %d", r), map[string]string{
			"main.tf": fmt.Sprintf("resource \"terraform_data\" \"x\" {\n  input = %d\n}\n", r)})
		t0 := time.Now()
		st, err := deliver("push", fake.Push(panicT{}, installation, repo, githubfake.PushOptions{Branch: "main", Before: before,
			After: sha, Paths: [][]string{{"main.tf"}}}))
		if err != nil || st != http.StatusOK {
			return fmt.Errorf("push: %d %v", st, err)
		}
		before = sha
		started, err := waitPlanStart(c, api.URL, session, m.workspace, sha)
		if err != nil {
			return err
		}
		latencies = append(latencies, float64(started.Sub(t0).Milliseconds()))
		// Free the workspace for the next round.
		if err := discardNewest(c, api.URL, session, m.workspace); err != nil {
			return err
		}
	}
	fmt.Printf("%-44s median %6.0f ms  max %6.0f ms  (%d rounds)\n", "push → plan sandbox start", median(latencies),
		percentile(latencies, 1), len(latencies))
	return nil
}

// waitPlanStart polls the workspace's newest run until its plan attempt
// recorded its start, and returns that time.
func waitPlanStart(c *http.Client, apiURL, session, workspaceID, sha string) (time.Time, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		var runs []struct {
			ID string `json:"id"`
		}
		if _, err := v1(c, http.MethodGet, apiURL+"/v1/runs?workspace_id="+workspaceID+"&limit=1", session, nil, "", &runs); err != nil {
			return time.Time{}, err
		}
		if len(runs) > 0 {
			var r struct {
				SourceProvenance *struct {
					CommitSHA string `json:"commit_sha"`
				} `json:"source_provenance"`
				Evidence struct {
					Attempts []struct {
						StartedAt *time.Time `json:"started_at"`
					} `json:"attempts"`
				} `json:"evidence"`
			}
			if _, err := v1(c, http.MethodGet, apiURL+"/v1/runs/"+runs[0].ID, session, nil, "", &r); err != nil {
				return time.Time{}, err
			}
			if r.SourceProvenance != nil && r.SourceProvenance.CommitSHA == sha && len(r.Evidence.Attempts) > 0 &&
				r.Evidence.Attempts[0].StartedAt != nil {
				return *r.Evidence.Attempts[0].StartedAt, nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Time{}, fmt.Errorf("no plan started for %s", sha)
}

// discardNewest cancels the workspace's newest run once it can be.
func discardNewest(c *http.Client, apiURL, session, workspaceID string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		var runs []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		}
		if _, err := v1(c, http.MethodGet, apiURL+"/v1/runs?workspace_id="+workspaceID+"&limit=1", session, nil, "", &runs); err != nil {
			return err
		}
		if len(runs) > 0 {
			switch runs[0].Status {
			case "awaiting_approval", "policy_override":
				_, err := v1(c, http.MethodPost, apiURL+"/v1/runs/"+runs[0].ID+"/actions/cancel", session, []byte("{}"), "application/json", nil)
				return err
			case "errored", "planned_and_finished", "canceled", "applied":
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("the newest run did not settle")
}
