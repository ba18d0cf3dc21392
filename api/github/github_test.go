package github_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/github"
	"github.com/cairnhq/cairn/api/github/githubfake"
	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/team"
	"github.com/cairnhq/cairn/api/workspace"
)

const webhookSecret = "test-webhook-secret-0123456789"

var usSettings = map[string]string{"tool_version": "1.10.6", "region": "us", "platform": "linux_amd64"}

// stack is a real cairn-api over a fresh database, configured as the app
// the fake code host knows.
type stack struct {
	env   *apitest.Env
	fake  *githubfake.Server
	owner *apitest.User
}

func withApp(fake *githubfake.Server) apitest.Option {
	return func(s *apitest.Settings) {
		s.Config.GitHubAppID = fake.AppID
		s.Config.GitHubPrivateKey = config.Secret(fake.KeyPEM)
		s.Config.GitHubWebhookSecret = webhookSecret
		s.Config.GitHubAPIURL = fake.URL
		s.Config.GitHubAppSlug = "cairn-test"
		s.Config.GitHubClientID = githubfake.ClientID
		s.Config.GitHubClientSecret = config.Secret(githubfake.ClientSecret)
	}
}

func newStack(t *testing.T) *stack {
	t.Helper()
	fake := githubfake.Start(t)
	env := apitest.New(t, withApp(fake))
	return &stack{env: env, fake: fake, owner: env.WithOrganization("codehost")}
}

// deliver posts a signed delivery as the provider does.
func (s *stack) deliver(t *testing.T, d githubfake.Delivery) *apitest.Response {
	t.Helper()
	req, err := d.Request(context.Background(), s.env.URL+"/v1/github/webhooks", webhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) *apitest.Response {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return &apitest.Response{Status: resp.StatusCode, Header: resp.Header, Body: raw}
}

// requireRefusedOversize: the server answers 413 and stops reading, so
// the client may see its write reset before it can read the answer.
func requireRefusedOversize(t *testing.T, req *http.Request) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if !strings.Contains(err.Error(), "reset") && !strings.Contains(err.Error(), "broken pipe") {
			t.Fatalf("oversize: %v", err)
		}
		return
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversize: %d", resp.StatusCode)
	}
}

type deliveryDoc struct {
	ID           string   `json:"id"`
	Result       string   `json:"result"`
	Outcome      string   `json:"outcome"`
	IngestionIDs []string `json:"source_ingestion_ids"`
	Replayed     bool     `json:"replayed"`
}

// startState starts the installation flow as u and returns its state.
func (s *stack) startState(t *testing.T, u *apitest.User) string {
	t.Helper()
	var started struct {
		InstallURL string `json:"install_url"`
	}
	u.Mutate(http.MethodPost, "/v1/github/installations/start", nil).MustStatus(t, http.StatusCreated).Data(t, &started)
	parsed, err := url.Parse(started.InstallURL)
	if err != nil || !strings.Contains(parsed.Path, "/github-apps/cairn-test/installations/new") {
		t.Fatalf("install URL %q", started.InstallURL)
	}
	return parsed.Query().Get("state")
}

func (s *stack) callback(t *testing.T, u *apitest.User, state string, installationID int64) *apitest.Response {
	t.Helper()
	return s.callbackAs(t, u, state, installationID, s.fake.InstallerCode(installationID))
}

// callbackAs completes the callback with the given installer's code.
func (s *stack) callbackAs(t *testing.T, u *apitest.User, state string, installationID int64, code string) *apitest.Response {
	t.Helper()
	q := url.Values{"state": {state}, "installation_id": {fmt.Sprint(installationID)}, "setup_action": {"install"}, "code": {code}}
	req, _ := http.NewRequest(http.MethodGet, s.env.URL+"/v1/github/installations/callback?"+q.Encode(), nil)
	req.Header.Set("Cookie", "__Secure-identity.session_token="+u.Token)
	return do(t, req)
}

// install puts the app on an account with one repository holding a
// configuration, binds it to the owner's organization and returns the
// repository.
func (s *stack) install(t *testing.T, installationID, repoID int64) {
	t.Helper()
	s.fake.AddRepository(githubfake.Repository{ID: repoID, Owner: "acme", Name: fmt.Sprintf("infra%d", repoID)})
	s.fake.AddInstallation(githubfake.Installation{ID: installationID, AccountLogin: "acme", Repositories: []int64{repoID}})
	res := s.callback(t, s.owner, s.startState(t, s.owner), installationID)
	if res.Status != http.StatusSeeOther {
		t.Fatalf("callback: %d %s", res.Status, res.Body)
	}
}

func (s *stack) workspace(t *testing.T, name string) string {
	t.Helper()
	var p, w struct{ ID string }
	s.owner.Mutate(http.MethodPost, "/v1/projects", map[string]string{"name": name}).MustStatus(t, http.StatusCreated).Data(t, &p)
	s.owner.Mutate(http.MethodPost, "/v1/workspaces", map[string]any{"project_id": p.ID, "name": name,
		"execution_settings": usSettings}).MustStatus(t, http.StatusCreated).Data(t, &w)
	return w.ID
}

func (s *stack) source(t *testing.T, workspaceID string, body map[string]any) *apitest.Response {
	t.Helper()
	return s.owner.Mutate(http.MethodPut, "/v1/workspaces/"+workspaceID+"/source", body)
}

func (s *stack) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := s.env.DB.Get(&n, query, args...); err != nil {
		t.Fatal(err)
	}
	return n
}

// pinnedSource is the code-host source a run's input snapshot pins.
func (s *stack) pinnedSource(t *testing.T, runID string) run.CodeHostSource {
	t.Helper()
	var snapshot []byte
	if err := s.env.DB.Get(&snapshot, `SELECT input_snapshot FROM runs WHERE id = $1`, runID); err != nil {
		t.Fatal(err)
	}
	var snap struct {
		Source *run.CodeHostSource `json:"source"`
	}
	if err := json.Unmarshal(snapshot, &snap); err != nil || snap.Source == nil {
		t.Fatalf("run %s pins no code-host source: %v", runID, err)
	}
	return *snap.Source
}

func mainTF() map[string]string {
	return map[string]string{"infra/main.tf": "resource \"terraform_data\" \"x\" {\n  input = \"a\"\n}\n", "README.md": "hi\n"}
}

// TestWebhookFailsClosed: without the app configured the receiver is 503;
// configured, a missing or wrong signature is 401 before the body is
// parsed (an unparsable body gets 401, not 400), and a body over 10 MB is
// refused whether its length is declared or not.
func TestWebhookFailsClosed(t *testing.T) {
	t.Parallel()
	bare := apitest.New(t)
	d := githubfake.NewDelivery("push", []byte(`{}`))
	req, _ := d.Request(context.Background(), bare.URL+"/v1/github/webhooks", webhookSecret)
	if res := do(t, req); res.Status != http.StatusServiceUnavailable {
		t.Fatalf("unconfigured: %d %s", res.Status, res.Body)
	}

	s := newStack(t)
	for name, mutate := range map[string]func(*http.Request){
		"missing": func(r *http.Request) { r.Header.Del("X-Hub-Signature-256") },
		"wrong": func(r *http.Request) {
			r.Header.Set("X-Hub-Signature-256", githubfake.Sign("another-secret-xxxxxxxx", []byte("not json")))
		},
		"garbage": func(r *http.Request) { r.Header.Set("X-Hub-Signature-256", "sha256=zz") },
	} {
		d := githubfake.NewDelivery("push", []byte("not json"))
		req, _ := d.Request(context.Background(), s.env.URL+"/v1/github/webhooks", webhookSecret)
		mutate(req)
		if res := do(t, req); res.Status != http.StatusUnauthorized || res.Code() != "WEBHOOK_SIGNATURE_INVALID" {
			t.Fatalf("%s signature: %d %s", name, res.Status, res.Body)
		}
	}
	// Signed but not JSON: only now is it parsed.
	if res := s.deliver(t, githubfake.NewDelivery("push", []byte("not json"))); res.Status != http.StatusBadRequest {
		t.Fatalf("signed garbage: %d %s", res.Status, res.Body)
	}

	big := bytes.Repeat([]byte(" "), github.MaxWebhookBytes+1)
	declared := githubfake.NewDelivery("push", big)
	req, _ = declared.Request(context.Background(), s.env.URL+"/v1/github/webhooks", webhookSecret)
	requireRefusedOversize(t, req)
	req, _ = declared.Request(context.Background(), s.env.URL+"/v1/github/webhooks", webhookSecret)
	req.Body = io.NopCloser(bytes.NewReader(big))
	req.ContentLength = -1 // chunked: the limit cuts the stream
	requireRefusedOversize(t, req)
	if n := s.count(t, `SELECT count(*) FROM github_deliveries`); n != 0 {
		t.Fatalf("%d refused deliveries recorded", n)
	}
}

// TestPushReplayConflictAndConvergence: a signed push to the tracked
// branch is accepted with one ingestion and one dispatch; an exact replay
// returns the same IDs and dispatches nothing; the same ID with another
// body is 409; 20 concurrent identical deliveries converge on one
// ingestion; a push touching no trigger path creates nothing.
func TestPushReplayConflictAndConvergence(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.install(t, 501, 9001)
	wsID := s.workspace(t, "tracked")
	s.source(t, wsID, map[string]any{"repository_id": 9001, "tracked_branch": "main", "working_directory": "infra",
		"trigger_paths": []string{"infra/**"}}).MustStatus(t, http.StatusCreated)
	sha := s.fake.Commit(9001, "main", "change infra", mainTF())
	body := s.fake.Push(t, 501, 9001, githubfake.PushOptions{Branch: "main", Before: strings.Repeat("1", 40), After: sha,
		Paths: [][]string{{"infra/main.tf"}}})
	d := githubfake.NewDelivery("push", body)
	var first, again deliveryDoc
	s.deliver(t, d).MustStatus(t, http.StatusOK).Data(t, &first)
	if first.Result != "accepted" || len(first.IngestionIDs) != 1 {
		t.Fatalf("push: %+v", first)
	}
	jobs := func() int {
		return s.count(t, `SELECT count(*) FROM river_job WHERE kind = 'source_ingestion'`)
	}
	if jobs() != 1 {
		t.Fatalf("%d dispatches", jobs())
	}
	s.deliver(t, d).MustStatus(t, http.StatusOK).Data(t, &again)
	if !again.Replayed || again.IngestionIDs[0] != first.IngestionIDs[0] || jobs() != 1 {
		t.Fatalf("replay: %+v, %d jobs", again, jobs())
	}
	other := d
	other.Body = s.fake.Push(t, 501, 9001, githubfake.PushOptions{Branch: "main", Before: strings.Repeat("1", 40), After: sha,
		Paths: [][]string{{"infra/other.tf"}}})
	if res := s.deliver(t, other); res.Status != http.StatusConflict || res.Code() != "WEBHOOK_DELIVERY_CONFLICT" {
		t.Fatalf("reused ID: %d %s", res.Status, res.Body)
	}

	// Twenty identical deliveries at once: one outcome, one ingestion.
	sha2 := s.fake.Commit(9001, "main", "second", map[string]string{"infra/main.tf": "# two\n"})
	burst := githubfake.NewDelivery("push", s.fake.Push(t, 501, 9001, githubfake.PushOptions{Branch: "main", Before: sha,
		After: sha2, Paths: [][]string{{"infra/main.tf"}}}))
	var wg sync.WaitGroup
	results := make([]deliveryDoc, 20)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.deliver(t, burst).MustStatus(t, http.StatusOK).Data(t, &results[i])
		}()
	}
	wg.Wait()
	for _, r := range results {
		if len(r.IngestionIDs) != 1 || r.IngestionIDs[0] != results[0].IngestionIDs[0] {
			t.Fatalf("diverged: %+v vs %+v", r, results[0])
		}
	}
	if n := s.count(t, `SELECT count(*) FROM source_ingestions WHERE head_sha = $1`, sha2); n != 1 || jobs() != 2 {
		t.Fatalf("%d ingestions, %d jobs", n, jobs())
	}

	// No trigger path touched: recorded, nothing created.
	sha3 := s.fake.Commit(9001, "main", "docs", map[string]string{"README.md": "docs\n"})
	var docs deliveryDoc
	s.deliver(t, githubfake.NewDelivery("push", s.fake.Push(t, 501, 9001, githubfake.PushOptions{Branch: "main", Before: sha2,
		After: sha3, Paths: [][]string{{"README.md"}}}))).MustStatus(t, http.StatusOK).Data(t, &docs)
	if docs.Result != "ignored" || docs.Outcome != "no_trigger_path_matched" || len(docs.IngestionIDs) != 0 || jobs() != 2 {
		t.Fatalf("untouched paths: %+v", docs)
	}
	// A created branch or rewritten history is conservative.
	var forced deliveryDoc
	s.deliver(t, githubfake.NewDelivery("push", s.fake.Push(t, 501, 9001, githubfake.PushOptions{Branch: "main", Before: sha2,
		After: sha3, Forced: true, Paths: [][]string{{"README.md"}}}))).MustStatus(t, http.StatusOK).Data(t, &forced)
	if forced.Result != "accepted" || len(forced.IngestionIDs) != 1 {
		t.Fatalf("forced push filtered: %+v", forced)
	}
}

// TestEveryExamplePayloadIsAcceptedOrIgnored replays every real push,
// pull_request, installation and installation_repositories example: each
// is recorded (accepted or durably ignored), never a 5xx, and a replay of
// each returns its record.
func TestEveryExamplePayloadIsAcceptedOrIgnored(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	for _, event := range []string{"push", "pull_request", "installation", "installation_repositories"} {
		for i, ex := range githubfake.Examples(t, event) {
			d := githubfake.NewDelivery(event, ex.Payload)
			res := s.deliver(t, d)
			if res.Status != http.StatusOK {
				t.Fatalf("%s #%d (%s): %d %s", event, i, ex.Action, res.Status, res.Body)
			}
			var again deliveryDoc
			s.deliver(t, d).MustStatus(t, http.StatusOK).Data(t, &again)
			if !again.Replayed {
				t.Fatalf("%s #%d not replayed", event, i)
			}
		}
	}
}

// TestInstallationCallbackNeedsTheInstaller: an administrator of another
// organization who completes their own valid state with the ID of someone
// else's fresh, unbound installation gets 403 and binds nothing: their
// authorization code shows they cannot see it. A missing, reused or
// foreign code is refused the same way, and the state stays usable for
// the real installer.
func TestInstallationCallbackNeedsTheInstaller(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.fake.AddRepository(githubfake.Repository{ID: 7101, Owner: "victim", Name: "infra"})
	s.fake.AddInstallation(githubfake.Installation{ID: 611, AccountLogin: "victim", Repositories: []int64{7101}})
	s.fake.AddInstallation(githubfake.Installation{ID: 612, AccountLogin: "attacker"})
	attacker := s.env.WithOrganization("attacker")
	state := s.startState(t, attacker)

	for name, code := range map[string]string{
		"the attacker's own code":    s.fake.InstallerCode(612),
		"no code":                    "",
		"a code the host never made": "not-a-code",
	} {
		if res := s.callbackAs(t, attacker, state, 611, code); res.Status != http.StatusForbidden || res.Code() != "GITHUB_INSTALLER_UNVERIFIED" {
			t.Fatalf("%s: %d %s", name, res.Status, res.Body)
		}
	}
	used := s.fake.InstallerCode(611)
	if res := s.callbackAs(t, s.owner, s.startState(t, s.owner), 611, used); res.Status != http.StatusSeeOther {
		t.Fatalf("the real installer: %d %s", res.Status, res.Body)
	}
	var st struct {
		Status string `json:"status"`
	}
	attacker.Get("/v1/github/installation").MustStatus(t, http.StatusOK).Data(t, &st)
	if st.Status != "not_installed" {
		t.Fatalf("the attacker's organization reads %q", st.Status)
	}
	// A spent code does not work twice, and the attacker's state is still
	// good for an installation the attacker really made.
	if res := s.callbackAs(t, attacker, state, 612, used); res.Code() != "GITHUB_INSTALLER_UNVERIFIED" {
		t.Fatalf("reused code: %d %s", res.Status, res.Body)
	}
	if res := s.callbackAs(t, attacker, state, 612, s.fake.InstallerCode(612)); res.Status != http.StatusSeeOther {
		t.Fatalf("the attacker's own installation: %d %s", res.Status, res.Body)
	}
}

// TestInstallationCallbackFence: a lifecycle event racing every provider
// read exhausts the three tries with a retryable 409 and leaves the state
// usable; without the race the same state binds the installation, and a
// second use is refused. A deleted installation never binds again.
func TestInstallationCallbackFence(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.fake.AddRepository(githubfake.Repository{ID: 7001, Owner: "acme", Name: "infra"})
	s.fake.AddInstallation(githubfake.Installation{ID: 601, AccountLogin: "acme", Repositories: []int64{7001}})
	state := s.startState(t, s.owner)
	s.fake.Hook(githubfake.RouteInstallation, func(*http.Request) {
		// A lifecycle delivery lands between the fence read and compare.
		s.deliver(t, githubfake.NewDelivery("installation", s.fake.InstallationEvent(t, 601, "new_permissions_accepted")))
	})
	res := s.callback(t, s.owner, state, 601)
	if res.Status != http.StatusConflict || res.Code() != "GITHUB_INSTALLATION_CHANGED" || res.Header.Get("Retry-After") == "" {
		t.Fatalf("raced callback: %d %s", res.Status, res.Body)
	}
	if n := s.fake.Calls(githubfake.RouteInstallation); n != github.FenceRetries {
		t.Fatalf("%d provider reads", n)
	}
	s.fake.Hook(githubfake.RouteInstallation, nil)
	if res := s.callback(t, s.owner, state, 601); res.Status != http.StatusSeeOther {
		t.Fatalf("callback after the race: %d %s", res.Status, res.Body)
	}
	if res := s.callback(t, s.owner, state, 601); res.Code() != "GITHUB_INSTALLATION_STATE_INVALID" {
		t.Fatalf("state reused: %d %s", res.Status, res.Body)
	}
	var st struct {
		Status         string `json:"status"`
		InstallationID int64  `json:"installation_id"`
	}
	s.owner.Get("/v1/github/installation").MustStatus(t, http.StatusOK).Data(t, &st)
	if st.Status != "connected" || st.InstallationID != 601 {
		t.Fatalf("status: %+v", st)
	}
	// Another member cannot use the owner's state; a forged one is refused.
	if res := s.callback(t, s.owner, state+"x", 601); res.Code() != "GITHUB_INSTALLATION_STATE_INVALID" {
		t.Fatalf("forged state: %d", res.Status)
	}

	// Repository additions and removals reconcile the complete current
	// set, keeping the deselected row as history.
	repos := func() []int64 {
		var ids []int64
		if err := s.env.DB.Select(&ids, `SELECT repository_id FROM github_repositories WHERE selected ORDER BY 1`); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	s.fake.AddRepository(githubfake.Repository{ID: 7002, Owner: "acme", Name: "more"})
	s.fake.UpdateInstallation(601, func(in *githubfake.Installation) { in.Repositories = []int64{7001, 7002} })
	s.deliver(t, githubfake.NewDelivery("installation_repositories", s.fake.RepositoriesEvent(t, 601, "added", 7002))).
		MustStatus(t, http.StatusOK)
	if got := repos(); !slices.Equal(got, []int64{7001, 7002}) {
		t.Fatalf("after added: %v", got)
	}
	s.fake.UpdateInstallation(601, func(in *githubfake.Installation) { in.Repositories = []int64{7002} })
	s.deliver(t, githubfake.NewDelivery("installation_repositories", s.fake.RepositoriesEvent(t, 601, "removed", 7001))).
		MustStatus(t, http.StatusOK)
	if got := repos(); !slices.Equal(got, []int64{7002}) || s.count(t, `SELECT count(*) FROM github_repositories`) != 2 {
		t.Fatalf("after removed: %v", got)
	}
	// Another organization's installation granting the same repository
	// does not move it.
	other := s.env.WithOrganization("other")
	s.fake.AddInstallation(githubfake.Installation{ID: 602, AccountLogin: "other", Repositories: []int64{7002}})
	if res := s.callback(t, other, s.startState(t, other), 602); res.Status != http.StatusSeeOther {
		t.Fatalf("other callback: %d %s", res.Status, res.Body)
	}
	if n := s.count(t, `SELECT count(*) FROM github_repositories WHERE repository_id = 7002 AND installation_id = 601`); n != 1 {
		t.Fatal("a repository moved between organizations")
	}

	// Suspension is reconciled from the provider; the callback never
	// reactivates it.
	s.fake.UpdateInstallation(601, func(in *githubfake.Installation) { in.Suspended = true })
	s.deliver(t, githubfake.NewDelivery("installation", s.fake.InstallationEvent(t, 601, "suspend"))).MustStatus(t, http.StatusOK)
	s.owner.Get("/v1/github/installation").MustStatus(t, http.StatusOK).Data(t, &st)
	if st.Status != "suspended" {
		t.Fatalf("after suspend: %+v", st)
	}
	s.fake.UpdateInstallation(601, func(in *githubfake.Installation) { in.Suspended = false })
	if res := s.callback(t, s.owner, s.startState(t, s.owner), 601); res.Code() != "GITHUB_INSTALLATION_INACTIVE" {
		t.Fatalf("callback reactivated: %d %s", res.Status, res.Body)
	}
	// Deletion revokes without a provider read and deselects everything.
	reads := s.fake.Calls(githubfake.RouteInstallation)
	s.deliver(t, githubfake.NewDelivery("installation", s.fake.InstallationEvent(t, 601, "deleted"))).MustStatus(t, http.StatusOK)
	if s.fake.Calls(githubfake.RouteInstallation) != reads {
		t.Fatal("deletion read the provider")
	}
	s.owner.Get("/v1/github/installation").MustStatus(t, http.StatusOK).Data(t, &st)
	if st.Status != "not_installed" || s.count(t, `SELECT count(*) FROM github_repositories WHERE selected`) != 0 {
		t.Fatalf("after delete: %+v", st)
	}
	if res := s.callback(t, s.owner, s.startState(t, s.owner), 601); res.Code() != "GITHUB_INSTALLATION_INACTIVE" {
		t.Fatalf("revoked installation bound again: %d %s", res.Status, res.Body)
	}
}

// TestSourceSettings: validation, permission, exact replay, history, and
// racing writers getting WORKSPACE_SOURCE_SETTINGS_CONFLICT or their own
// version, never a duplicate number.
func TestSourceSettings(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.install(t, 701, 8001)
	wsID := s.workspace(t, "settings")
	ok := map[string]any{"repository_id": 8001, "tracked_branch": "main", "working_directory": "infra/",
		"trigger_paths": []string{"infra/**", "modules/*/x.tf", "a?.tf"}}
	for name, bad := range map[string]map[string]any{
		"unselected repository": {"repository_id": 999, "tracked_branch": "main"},
		"absolute glob":         {"repository_id": 8001, "tracked_branch": "main", "trigger_paths": []string{"/etc"}},
		"traversal":             {"repository_id": 8001, "tracked_branch": "main", "trigger_paths": []string{"a/../b"}},
		"dot segment":           {"repository_id": 8001, "tracked_branch": "main", "trigger_paths": []string{"./a"}},
		"backslash":             {"repository_id": 8001, "tracked_branch": "main", "trigger_paths": []string{"a\\b"}},
		"duplicate":             {"repository_id": 8001, "tracked_branch": "main", "trigger_paths": []string{"a", "a"}},
		"bad branch":            {"repository_id": 8001, "tracked_branch": "a..b"},
		"escaping directory":    {"repository_id": 8001, "tracked_branch": "main", "working_directory": "../x"},
		"foreign credential":    {"repository_id": 8001, "tracked_branch": "main", "speculative_credential_version_id": "cpv_nope"},
	} {
		if res := s.source(t, wsID, bad); res.Status != http.StatusBadRequest {
			t.Fatalf("%s: %d %s", name, res.Status, res.Body)
		}
	}
	many := make([]string, 101)
	for i := range many {
		many[i] = fmt.Sprintf("p%d", i)
	}
	if res := s.source(t, wsID, map[string]any{"repository_id": 8001, "tracked_branch": "main", "trigger_paths": many}); res.Status/100 != 4 {
		t.Fatalf("101 trigger paths: %d", res.Status)
	}
	key := apitest.NewKey()
	var v1, replay struct {
		ID               string `json:"id"`
		Version          int    `json:"version"`
		WorkingDirectory string `json:"working_directory"`
	}
	put := func(key string, body any) *apitest.Response {
		return s.owner.Do(apitest.Request{Method: http.MethodPut, Path: "/v1/workspaces/" + wsID + "/source", Body: body,
			Header: map[string]string{"Idempotency-Key": key}})
	}
	put(key, ok).MustStatus(t, http.StatusCreated).Data(t, &v1)
	put(key, ok).MustStatus(t, http.StatusCreated).Data(t, &replay)
	if v1.Version != 1 || replay.ID != v1.ID || v1.WorkingDirectory != "infra" {
		t.Fatalf("replay: %+v %+v", v1, replay)
	}
	changed := map[string]any{"repository_id": 8001, "tracked_branch": "prod"}
	if res := put(key, changed); res.Code() != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("changed settings under one key: %d %s", res.Status, res.Body)
	}
	var wg sync.WaitGroup
	statuses := make([]int, 8)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := put(apitest.NewKey(), changed)
			statuses[i] = res.Status
			if res.Status == http.StatusConflict && res.Code() != "WORKSPACE_SOURCE_SETTINGS_CONFLICT" {
				t.Errorf("conflict code %s", res.Code())
			}
		}()
	}
	wg.Wait()
	created := 0
	for _, st := range statuses {
		switch st {
		case http.StatusCreated:
			created++
		case http.StatusConflict:
		default:
			t.Fatalf("racing writer got %d", st)
		}
	}
	if n := s.count(t, `SELECT count(DISTINCT version) FROM workspace_source_settings WHERE workspace_id = $1`, wsID); n != created+1 {
		t.Fatalf("%d versions for %d successful writes", n, created+1)
	}
	var doc struct {
		Current *struct{ Version int }  `json:"current"`
		History []struct{ Version int } `json:"history"`
	}
	s.owner.Get("/v1/workspaces/"+wsID+"/source").MustStatus(t, http.StatusOK).Data(t, &doc)
	if doc.Current == nil || doc.Current.Version != created+1 || len(doc.History) != created+1 {
		t.Fatalf("history: %+v", doc)
	}
	reader := s.env.SignUp("reader")
	s.env.Join(s.owner, reader, "reader")
	if res := reader.Mutate(http.MethodPut, "/v1/workspaces/"+wsID+"/source", ok); res.Status != http.StatusForbidden {
		t.Fatalf("reader saved: %d", res.Status)
	}
	// Admin of another workspace is not admin here: a member whose team
	// administers one workspace and reads this one cannot bind this one
	// to a repository (whose code would then run with its secrets).
	member := s.env.SignUp("member")
	s.env.Join(s.owner, member, "member")
	elsewhere := s.workspace(t, "elsewhere")
	owner := access.Principal{Kind: access.KindUser, ID: s.owner.ID, OrganizationID: s.owner.OrganizationID,
		Role: access.RoleOwner, Permissions: access.PermissionsOf(access.RoleOwner)}
	teams := team.NewService(s.env.DB, workspace.NewService(s.env.DB, nil, nil, s.env.Config.ToolVersions))
	ctx := context.Background()
	if err := db.WithTx(ctx, s.env.DB, func(tx *sqlx.Tx) error {
		tm, err := teams.Create(ctx, tx, owner, team.CreateInput{Name: "platform"})
		if err != nil {
			return err
		}
		if err := teams.AddMembers(ctx, tx, owner, tm.ID, []string{member.ID}); err != nil {
			return err
		}
		if _, err := teams.GrantWorkspace(ctx, tx, owner, tm.ID, elsewhere, team.WorkspaceAccessInput{Access: access.LevelAdmin}); err != nil {
			return err
		}
		_, err = teams.GrantWorkspace(ctx, tx, owner, tm.ID, wsID, team.WorkspaceAccessInput{Access: access.LevelRead})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if res := member.Mutate(http.MethodPut, "/v1/workspaces/"+wsID+"/source", ok); res.Status != http.StatusForbidden {
		t.Fatalf("another workspace's admin saved this one's source: %d", res.Status)
	}
	member.Mutate(http.MethodPut, "/v1/workspaces/"+elsewhere+"/source", ok).MustStatus(t, http.StatusCreated)
}

// TestIngestionCreatesRuns drives the ingestion job itself: a push to the
// tracked branch becomes a ready ingestion with a sealed configuration of
// the working directory and a tracked plan_and_apply run whose identity
// derives from the ingestion; a retry creates nothing more; a pull request
// becomes a speculative run without credentials; a pull request whose
// paginated changed files miss every trigger path is skipped.
func TestIngestionCreatesRuns(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.install(t, 801, 6001)
	wsID := s.workspace(t, "ingest")
	s.source(t, wsID, map[string]any{"repository_id": 6001, "tracked_branch": "main", "working_directory": "infra",
		"trigger_paths": []string{"infra/**"}}).MustStatus(t, http.StatusCreated)
	gh := s.env.Server.Services().GitHub
	ctx := context.Background()

	files0 := mainTF()
	files0["infra/.terraform.lock.hcl"] = "# This file is maintained automatically by \"tofu init\".\n"
	sha := s.fake.Commit(6001, "main", "Add the thing\n\nlonger body", files0)
	var push deliveryDoc
	s.deliver(t, githubfake.NewDelivery("push", s.fake.Push(t, 801, 6001, githubfake.PushOptions{Branch: "main",
		Before: strings.Repeat("2", 40), After: sha, Paths: [][]string{{"infra/main.tf"}}}))).MustStatus(t, http.StatusOK).Data(t, &push)
	// A lost token exchange and a temporary provider failure fail the
	// attempt (River retries it) and change nothing.
	s.fake.Inject(githubfake.RouteAccessToken, githubfake.Fault{Lose: true})
	if err := gh.Ingest(ctx, push.IngestionIDs[0]); err == nil {
		t.Fatal("a lost token exchange did not fail the attempt")
	}
	s.fake.Inject(githubfake.RouteCommit, githubfake.Fault{Status: http.StatusBadGateway})
	if err := gh.Ingest(ctx, push.IngestionIDs[0]); err == nil {
		t.Fatal("a provider 502 did not fail the attempt")
	}
	if n := s.count(t, `SELECT count(*) FROM source_ingestions WHERE id = $1 AND status = 'pending'`, push.IngestionIDs[0]); n != 1 {
		t.Fatal("a failed attempt settled the ingestion")
	}
	if err := gh.Ingest(ctx, push.IngestionIDs[0]); err != nil {
		t.Fatalf("ingest: %v", err)
	}
	if err := gh.Ingest(ctx, push.IngestionIDs[0]); err != nil {
		t.Fatalf("retried ingest: %v", err)
	}
	var ing struct {
		Status string  `db:"status"`
		RunID  *string `db:"run_id"`
		Commit *string `db:"commit_sha"`
		CV     *string `db:"configuration_version_id"`
	}
	if err := s.env.DB.Get(&ing, `SELECT status, run_id, commit_sha, configuration_version_id FROM source_ingestions
		WHERE id = $1`, push.IngestionIDs[0]); err != nil {
		t.Fatal(err)
	}
	if ing.Status != "ready" || ing.RunID == nil || *ing.RunID != run.RunIDOf(push.IngestionIDs[0]) || *ing.Commit != sha {
		t.Fatalf("ingestion: %+v", ing)
	}
	var r struct {
		Kind       string `json:"kind"`
		Source     string `json:"source"`
		Message    string `json:"message"`
		Provenance *struct {
			ConfigurationVersionID string `json:"configuration_version_id"`
			ConfigurationArtifact  string `json:"configuration_artifact_id"`
			CommitSHA              string `json:"commit_sha"`
			CommitMessage          string `json:"commit_message"`
			SourceIngestionID      string `json:"source_ingestion_id"`
			WorkflowID             string `json:"workflow_id"`
			DeliveryID             string `json:"delivery_id"`
			ArchiveSHA256          string `json:"archive_sha256"`
			WorkingDirectory       string `json:"working_directory"`
		} `json:"source_provenance"`
	}
	s.owner.Get("/v1/runs/"+*ing.RunID).MustStatus(t, http.StatusOK).Data(t, &r)
	if r.Kind != "plan_and_apply" || r.Source != "vcs" || r.Provenance == nil || r.Provenance.CommitSHA != sha ||
		r.Provenance.SourceIngestionID != push.IngestionIDs[0] || r.Provenance.WorkflowID != "source-ingestion-"+push.IngestionIDs[0] ||
		r.Provenance.WorkingDirectory != "infra" || !strings.HasPrefix(r.Provenance.CommitMessage, "Add the thing") {
		t.Fatalf("run review: %s", s.owner.Get("/v1/runs/"+*ing.RunID).Body)
	}
	// The message is the server's own, never the commit's text.
	if want := "Push " + sha[:7] + " to main"; r.Message != want {
		t.Fatalf("push run message %q, want %q", r.Message, want)
	}
	requireNoObjectKey(t, s, *ing.RunID, r.Provenance.ConfigurationVersionID, r.Provenance.ConfigurationArtifact)
	requireSealedArchive(t, s, r.Provenance.ConfigurationVersionID)
	if n := s.count(t, `SELECT count(*) FROM runs WHERE workspace_id = $1`, wsID); n != 1 {
		t.Fatalf("%d runs", n)
	}
	if src := s.pinnedSource(t, *ing.RunID); src.CommitSHA != sha || src.RepositoryID != 6001 ||
		src.WorkingDirectory != "infra" || src.DeliveryID == "" || src.ArchiveSHA256 == "" {
		t.Fatalf("pinned source: %+v", src)
	}
	// A chain whose digest no longer agrees is not shown as provenance.
	defer func() {
		if _, err := s.env.DB.Exec(`UPDATE source_ingestions SET archive_sha256 = sha256('other') WHERE id = $1`,
			push.IngestionIDs[0]); err != nil {
			t.Fatal(err)
		}
		var broken struct {
			Provenance  any      `json:"source_provenance"`
			NotRecorded []string `json:"not_recorded"`
		}
		s.owner.Get("/v1/runs/"+*ing.RunID).MustStatus(t, http.StatusOK).Data(t, &broken)
		if broken.Provenance != nil || !slices.Contains(broken.NotRecorded, "source_provenance") {
			t.Fatalf("broken chain shown: %+v", broken)
		}
	}()
	target, err := github.CheckTargetOf(ctx, s.env.DB, *ing.RunID)
	if err != nil || target == nil || target.HeadSHA != sha || target.InstallationID != 801 || target.Owner != "acme" {
		t.Fatalf("check target: %v %+v", err, target)
	}

	// A same-repository pull request: speculative, no credentials.
	head := s.fake.Commit(6001, "feature", "feature work", mainTF())
	files := make([]string, 0, 130)
	for i := range 129 {
		files = append(files, fmt.Sprintf("docs/%03d.md", i))
	}
	s.fake.SetPullFiles(6001, 12, append(files, "infra/main.tf")) // the match is on the second page
	var pr deliveryDoc
	s.deliver(t, githubfake.NewDelivery("pull_request", s.fake.PullRequest(t, 801, 6001, githubfake.PullOptions{Number: 12,
		Base: "main", HeadRef: "feature", HeadSHA: head}))).MustStatus(t, http.StatusOK).Data(t, &pr)
	if len(pr.IngestionIDs) != 1 {
		t.Fatalf("pull request: %+v", pr)
	}
	if err := gh.Ingest(ctx, pr.IngestionIDs[0]); err != nil {
		t.Fatal(err)
	}
	s.owner.Get("/v1/runs/"+run.RunIDOf(pr.IngestionIDs[0])).MustStatus(t, http.StatusOK).Data(t, &r)
	if want := "Pull request #12 at " + head[:7]; r.Kind != "speculative" || r.Message != want {
		t.Fatalf("pull request run: %+v, want message %q", r, want)
	}

	// Only documentation changed: skipped after reading every page.
	head2 := s.fake.Commit(6001, "docs", "docs only", mainTF())
	s.fake.SetPullFiles(6001, 13, files)
	var docs deliveryDoc
	s.deliver(t, githubfake.NewDelivery("pull_request", s.fake.PullRequest(t, 801, 6001, githubfake.PullOptions{Number: 13,
		Base: "main", HeadRef: "docs", HeadSHA: head2, Fork: true}))).MustStatus(t, http.StatusOK).Data(t, &docs)
	if err := gh.Ingest(ctx, docs.IngestionIDs[0]); err != nil {
		t.Fatal(err)
	}
	if n := s.count(t, `SELECT count(*) FROM source_ingestions WHERE id = $1 AND status = 'skipped' AND run_id IS NULL`,
		docs.IngestionIDs[0]); n != 1 {
		t.Fatal("documentation-only pull request was not skipped")
	}
}

// requireNoObjectKey: the review of a code-host run names its
// configuration artifact by an ID that is not the archive's storage key
// nor any segment of it, so no ID in the review rebuilds the key (SPEC §2:
// object keys never appear in the review).
func requireNoObjectKey(t *testing.T, s *stack, runID, configurationVersionID, artifactID string) {
	t.Helper()
	var key string
	if err := s.env.DB.Get(&key, `SELECT blob_key FROM configuration_versions WHERE id = $1`, configurationVersionID); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(artifactID, "cfa_") {
		t.Fatalf("configuration_artifact_id %q is not a public ID", artifactID)
	}
	body := string(s.owner.Get("/v1/runs/"+runID).MustStatus(t, http.StatusOK).Body)
	for _, segment := range strings.Split(key, "/") {
		if strings.HasPrefix(segment, "obj_") && strings.Contains(body, segment) {
			t.Fatalf("the review shows the object segment %q of key %q", segment, key)
		}
	}
	if strings.Contains(body, key) || strings.Contains(key, artifactID) {
		t.Fatalf("the review's artifact ID %q leads to key %q", artifactID, key)
	}
}

// requireSealedArchive: once ingested, the configuration version's archive
// (its key, digest and size) and its lock file digest cannot be changed,
// whoever writes to the database (SPEC §6 Configuration ingestion); only
// the two transitions the trigger allows remain.
func requireSealedArchive(t *testing.T, s *stack, configurationVersionID string) {
	t.Helper()
	var lock []byte
	if err := s.env.DB.Get(&lock, `SELECT lock_file_sha256 FROM configuration_versions WHERE id = $1`, configurationVersionID); err != nil {
		t.Fatal(err)
	}
	if len(lock) != 32 {
		t.Fatalf("the ingested archive's lock file has no digest (%x)", lock)
	}
	for name, set := range map[string]string{
		"archive digest":   `sha256 = sha256('another archive')`,
		"lock file digest": `lock_file_sha256 = sha256('another lock file')`,
		"dropped lock":     `lock_file_sha256 = NULL`,
		"archive object":   `blob_key = blob_key || '-swapped'`,
		"archive size":     `size_bytes = size_bytes + 1`,
		"back to pending":  `status = 'pending'`,
	} {
		_, err := s.env.DB.Exec(`UPDATE configuration_versions SET `+set+` WHERE id = $1`, configurationVersionID)
		if err == nil || !strings.Contains(err.Error(), "is immutable") {
			t.Fatalf("%s changed on a sealed configuration version: %v", name, err)
		}
	}
}
