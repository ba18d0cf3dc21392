package githubfake

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
)

// Example is one real webhook payload from @octokit/webhooks-examples.
type Example struct {
	Event   string
	Action  string // "" for events without one (push)
	Payload json.RawMessage
}

var examples struct {
	sync.Once
	byEvent map[string][]Example
	err     error
}

// Examples returns every example payload of an event from the pinned
// @octokit/webhooks-examples, installing it (npm ci from the lock file)
// the first time a test needs it.
func Examples(t T, event string) []Example {
	t.Helper()
	examples.Do(func() { examples.byEvent, examples.err = loadExamples() })
	if examples.err != nil {
		t.Fatal(examples.err)
	}
	out := examples.byEvent[event]
	if len(out) == 0 {
		t.Fatalf("no %s examples in @octokit/webhooks-examples", event)
	}
	return out
}

func loadExamples() (map[string][]Example, error) {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "testdata", "octokit")
	index := filepath.Join(dir, "node_modules", "@octokit", "webhooks-examples", "api.github.com", "index.json")
	if err := installExamples(dir, index); err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(index)
	if err != nil {
		return nil, err
	}
	var doc []struct {
		Name     string            `json:"name"`
		Examples []json.RawMessage `json:"examples"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("decoding webhooks-examples index: %w", err)
	}
	out := map[string][]Example{}
	for _, e := range doc {
		for _, p := range e.Examples {
			var head struct {
				Action string `json:"action"`
			}
			_ = json.Unmarshal(p, &head)
			out[e.Name] = append(out[e.Name], Example{Event: e.Name, Action: head.Action, Payload: p})
		}
	}
	return out, nil
}

// first is an example of the event with the action, as a mutable map.
func first(t T, event, action string) map[string]any {
	t.Helper()
	for _, e := range Examples(t, event) {
		if e.Action == action {
			var m map[string]any
			if err := json.Unmarshal(e.Payload, &m); err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	t.Fatalf("no %s/%s example", event, action)
	return nil
}

func (s *Server) repoFor(t T, repoID int64) Repository {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[repoID]
	if r == nil {
		t.Fatalf("fake has no repository %d", repoID)
	}
	return *r
}

// retarget points a real payload's repository and installation at the
// fake's, keeping every other field the provider sent.
func retarget(m map[string]any, repo Repository, installationID int64) {
	r, _ := m["repository"].(map[string]any)
	if r == nil {
		r = map[string]any{}
		m["repository"] = r
	}
	r["id"], r["name"], r["full_name"], r["default_branch"] = repo.ID, repo.Name, repo.FullName(), repo.DefaultBranch
	if owner, ok := r["owner"].(map[string]any); ok {
		owner["login"], owner["id"], owner["name"] = repo.Owner, repo.OwnerID, repo.Owner
	}
	m["installation"] = map[string]any{"id": installationID, "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9u"}
}

// PushOptions shape a push delivery.
type PushOptions struct {
	Branch string
	// Before is the previous head; "" means the branch was created.
	Before string
	After  string
	Forced bool
	// Paths are the files each commit touched (one commit per entry).
	Paths [][]string
}

// Push is a real push payload retargeted at a repository of the fake.
func (s *Server) Push(t T, installationID, repoID int64, o PushOptions) []byte {
	t.Helper()
	repo := s.repoFor(t, repoID)
	m := first(t, "push", "")
	retarget(m, repo, installationID)
	m["ref"] = "refs/heads/" + o.Branch
	before := o.Before
	if before == "" {
		before = "0000000000000000000000000000000000000000"
	}
	m["before"], m["after"], m["created"], m["forced"], m["deleted"] = before, o.After, o.Before == "", o.Forced, false
	m["base_ref"] = nil
	var commits []any
	for i, paths := range o.Paths {
		commits = append(commits, map[string]any{
			"id": fmt.Sprintf("%040x", i+1), "tree_id": fmt.Sprintf("%040x", i+1), "distinct": true,
			"message": "change", "timestamp": "2026-01-01T00:00:00Z", "url": "https://github.com/" + repo.FullName(),
			"author":    map[string]any{"name": "Octo Cat", "email": "octocat@example.com", "username": "octocat"},
			"committer": map[string]any{"name": "Octo Cat", "email": "octocat@example.com", "username": "octocat"},
			"added":     []string{}, "removed": []string{}, "modified": paths,
		})
	}
	if commits == nil {
		commits = []any{}
	}
	m["commits"] = commits
	if len(commits) > 0 {
		hc := commits[len(commits)-1].(map[string]any)
		hc["id"] = o.After
		m["head_commit"] = hc
	}
	return mustJSON(t, m)
}

// PullOptions shape a pull_request delivery.
type PullOptions struct {
	Action  string // opened, synchronize, ...
	Number  int
	Base    string
	HeadRef string
	HeadSHA string
	// Fork makes the head repository another one than the base: a fork
	// owned by ForkOwner ("forker" when empty).
	Fork      bool
	ForkOwner string
}

// PullRequest is a real pull_request payload retargeted at a repository
// of the fake.
func (s *Server) PullRequest(t T, installationID, repoID int64, o PullOptions) []byte {
	t.Helper()
	repo := s.repoFor(t, repoID)
	action := o.Action
	if action == "" {
		action = "opened"
	}
	m := first(t, "pull_request", action)
	retarget(m, repo, installationID)
	m["number"] = o.Number
	pr := m["pull_request"].(map[string]any)
	pr["number"], pr["state"] = o.Number, "open"
	base := pr["base"].(map[string]any)
	head := pr["head"].(map[string]any)
	base["ref"], base["repo"] = o.Base, m["repository"]
	head["ref"], head["sha"] = o.HeadRef, o.HeadSHA
	if o.Fork {
		owner := o.ForkOwner
		if owner == "" {
			owner = "forker"
		}
		head["repo"] = map[string]any{"id": repo.ID + 7_000_000, "name": repo.Name, "full_name": owner + "/" + repo.Name,
			"owner": map[string]any{"login": owner, "id": 99}, "fork": true}
	} else {
		head["repo"] = m["repository"]
	}
	return mustJSON(t, m)
}

// InstallationEvent is a real installation payload for one of the fake's
// installations.
func (s *Server) InstallationEvent(t T, installationID int64, action string) []byte {
	t.Helper()
	m := first(t, "installation", action)
	s.mu.Lock()
	in := s.installations[installationID]
	var c Installation
	if in != nil {
		c = *in
	}
	s.mu.Unlock()
	if in == nil {
		c = Installation{ID: installationID, AccountLogin: "gone", AccountID: installationID + 1_000_000, AccountType: "Organization"}
	}
	m["installation"] = s.installationJSON(c)
	return mustJSON(t, m)
}

// RepositoriesEvent is a real installation_repositories payload.
func (s *Server) RepositoriesEvent(t T, installationID int64, action string, repoIDs ...int64) []byte {
	t.Helper()
	m := first(t, "installation_repositories", action)
	s.mu.Lock()
	c := *s.installations[installationID]
	var repos []any
	for _, id := range repoIDs {
		if r := s.repos[id]; r != nil {
			repos = append(repos, map[string]any{"id": r.ID, "name": r.Name, "full_name": r.FullName(), "private": r.Private,
				"node_id": "R_x"})
		}
	}
	s.mu.Unlock()
	m["installation"] = s.installationJSON(c)
	key := "repositories_added"
	if action == "removed" {
		key = "repositories_removed"
	}
	m["repositories_added"], m["repositories_removed"] = []any{}, []any{}
	m[key] = repos
	return mustJSON(t, m)
}

func mustJSON(t T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Sign is the provider's X-Hub-Signature-256 value for a body.
func Sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Delivery is one webhook delivery as the provider sends it.
type Delivery struct {
	ID    string
	Event string
	Body  []byte
}

// NewDelivery gives a delivery a fresh provider delivery ID.
func NewDelivery(event string, body []byte) Delivery {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return Delivery{ID: fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:]), Event: event, Body: body}
}

// Request builds the signed POST the provider sends to a webhook URL.
func (d Delivery) Request(ctx context.Context, url, secret string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(d.Body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/fake")
	req.Header.Set("X-GitHub-Event", d.Event)
	req.Header.Set("X-GitHub-Delivery", d.ID)
	req.Header.Set("X-GitHub-Hook-ID", "1")
	req.Header.Set("X-Hub-Signature-256", Sign(secret, d.Body))
	return req, nil
}

// installExamples runs npm ci once for every test process on the machine:
// `go test ./...` runs several packages that read the examples at the same
// time, and npm ci deletes node_modules before it fills it again, so an
// unlocked second install would pull the files from under the first
// reader.
func installExamples(dir, index string) error {
	lock, err := os.OpenFile(filepath.Join(dir, ".install.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("opening the examples install lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("taking the examples install lock: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(index); err == nil {
		return nil
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm ci (Node.js and npm are required): %v\n%s", err, out)
	}
	return nil
}
