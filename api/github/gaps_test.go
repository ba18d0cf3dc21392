package github_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/github"
	"github.com/cairnhq/cairn/api/github/githubfake"
	"github.com/cairnhq/cairn/api/run"
)

// principalOf is u as the service sees them, with their role's
// permissions.
func principalOf(u *apitest.User, role access.Role) access.Principal {
	return access.Principal{Kind: access.KindUser, ID: u.ID, OrganizationID: u.OrganizationID, Role: role,
		Permissions: access.PermissionsOf(role)}
}

// TestInstallationStateIsBoundAndExpires: starting an installation needs
// vcs:install (a writer is refused and no state is recorded); a valid
// state completes only for the organization and the principal that
// started it (another administrator of the same organization and the
// owner of another organization are refused); the state lives ten
// minutes exactly, and a refused use leaves it usable.
func TestInstallationStateIsBoundAndExpires(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.fake.AddRepository(githubfake.Repository{ID: 7201, Owner: "acme", Name: "infra"})
	s.fake.AddInstallation(githubfake.Installation{ID: 621, AccountLogin: "acme", Repositories: []int64{7201}})

	writer := s.env.SignUp("writer")
	s.env.Join(s.owner, writer, "writer")
	if res := writer.Mutate(http.MethodPost, "/v1/github/installations/start", nil); res.Status != http.StatusForbidden {
		t.Fatalf("a writer started an installation: %d %s", res.Status, res.Body)
	}
	if n := s.count(t, `SELECT count(*) FROM github_install_states WHERE principal_id = $1`, writer.ID); n != 0 {
		t.Fatalf("a refused start recorded %d states", n)
	}

	var started struct {
		InstallURL string    `json:"install_url"`
		ExpiresAt  time.Time `json:"expires_at"`
	}
	before := time.Now()
	s.owner.Mutate(http.MethodPost, "/v1/github/installations/start", nil).MustStatus(t, http.StatusCreated).Data(t, &started)
	if life := started.ExpiresAt.Sub(before); life < github.StateLifetime-time.Minute || life > github.StateLifetime+time.Second {
		t.Fatalf("state expires after %s", life)
	}
	state := s.startState(t, s.owner)

	admin := s.env.SignUp("admin")
	s.env.Join(s.owner, admin, "admin")
	stranger := s.env.WithOrganization("stranger")
	for name, u := range map[string]*apitest.User{"another administrator": admin, "another organization's owner": stranger,
		"a writer": writer} {
		res := s.callback(t, u, state, 621)
		if res.Status == http.StatusSeeOther || (res.Code() != "GITHUB_INSTALLATION_STATE_INVALID" && res.Status != http.StatusForbidden) {
			t.Fatalf("%s used the owner's state: %d %s", name, res.Status, res.Body)
		}
	}

	gh := s.env.Server.Services().GitHub
	ctx := context.Background()
	owner := principalOf(s.owner, access.RoleOwner)
	var expiresAt time.Time
	if err := s.env.DB.Get(&expiresAt, `SELECT expires_at FROM github_install_states WHERE id = $1`,
		strings.SplitN(state, ".", 2)[0]); err != nil {
		t.Fatal(err)
	}
	at := func(d time.Duration) *github.Service {
		return gh.WithClock(func() time.Time { return expiresAt.Add(d) })
	}
	code := s.fake.InstallerCode(621)
	if _, err := at(0).CompleteInstallation(ctx, owner, state, code, 621); !errors.Is(err, github.ErrStateInvalid) {
		t.Fatalf("state used at its expiry: %v", err)
	}
	if _, err := at(-time.Second).CompleteInstallation(ctx, owner, state, code, 621); err != nil {
		t.Fatalf("state refused a second before its expiry (after the refusals above): %v", err)
	}
	if _, err := at(-time.Second).CompleteInstallation(ctx, owner, state, s.fake.InstallerCode(621), 621); !errors.Is(err, github.ErrStateInvalid) {
		t.Fatalf("state used twice: %v", err)
	}
}

// withAction rewrites a real lifecycle payload's action: the provider may
// add actions Cairn has never heard of.
func withAction(t *testing.T, body []byte, action string) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	m["action"] = action
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLifecycleFenceRace: a lifecycle delivery raced on each of its three
// fence passes (here by deliveries of an action Cairn does not know,
// which still advance the fence) gets a retryable 409 and acknowledges
// nothing: no delivery record, the installation unchanged. Each unknown
// action is durably recorded as ignored and replays as such. Retried
// without the race, the same delivery is accepted and reconciled.
func TestLifecycleFenceRace(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.install(t, 631, 7301)

	var unknown []githubfake.Delivery
	s.fake.Hook(githubfake.RouteInstallation, func(*http.Request) {
		d := githubfake.NewDelivery("installation", withAction(t, s.fake.InstallationEvent(t, 631, "suspend"), "renamed_in_2031"))
		unknown = append(unknown, d)
		var doc deliveryDoc
		s.deliver(t, d).MustStatus(t, http.StatusOK).Data(t, &doc)
		if doc.Result != "ignored" || doc.Outcome != "action_not_handled" {
			t.Errorf("unknown action: %+v", doc)
		}
	})
	s.fake.UpdateInstallation(631, func(in *githubfake.Installation) { in.Suspended = true })
	suspend := githubfake.NewDelivery("installation", s.fake.InstallationEvent(t, 631, "suspend"))
	reads := s.fake.Calls(githubfake.RouteInstallation)
	res := s.deliver(t, suspend)
	if res.Status != http.StatusConflict || res.Code() != "GITHUB_INSTALLATION_CHANGED" || res.Header.Get("Retry-After") == "" {
		t.Fatalf("raced lifecycle delivery: %d %s", res.Status, res.Body)
	}
	if n := s.fake.Calls(githubfake.RouteInstallation) - reads; n != github.FenceRetries {
		t.Fatalf("%d provider reads for %d fence passes", n, github.FenceRetries)
	}
	if n := s.count(t, `SELECT count(*) FROM github_deliveries WHERE delivery_id = $1`, suspend.ID); n != 0 {
		t.Fatal("a raced delivery was acknowledged")
	}
	var st struct {
		Status string `json:"status"`
	}
	s.owner.Get("/v1/github/installation").MustStatus(t, http.StatusOK).Data(t, &st)
	if st.Status != "connected" {
		t.Fatalf("a raced suspension changed the installation to %q", st.Status)
	}
	s.fake.Hook(githubfake.RouteInstallation, nil)
	if len(unknown) != github.FenceRetries || s.count(t, `SELECT count(*) FROM github_deliveries
		WHERE action = 'renamed_in_2031' AND kind = 'lifecycle' AND result = 'ignored' AND outcome = 'action_not_handled'`) != github.FenceRetries {
		t.Fatalf("%d unknown actions delivered, not each recorded as ignored", len(unknown))
	}
	var again deliveryDoc
	s.deliver(t, unknown[0]).MustStatus(t, http.StatusOK).Data(t, &again)
	if !again.Replayed || again.Result != "ignored" {
		t.Fatalf("unknown action replay: %+v", again)
	}

	var accepted deliveryDoc
	s.deliver(t, suspend).MustStatus(t, http.StatusOK).Data(t, &accepted)
	s.owner.Get("/v1/github/installation").MustStatus(t, http.StatusOK).Data(t, &st)
	if accepted.Result != "accepted" || st.Status != "suspended" {
		t.Fatalf("retried suspension: %+v, installation %q", accepted, st.Status)
	}
}

// TestSourceSettingsWritersCollide forces two writers onto one version
// number: a transaction of the test holds version 2 uncommitted while the
// API's writer, which read version 1 as the latest, inserts its own
// version 2 and waits on the unique key; when the test commits, the
// API's writer must answer 409 WORKSPACE_SOURCE_SETTINGS_CONFLICT and
// write nothing.
func TestSourceSettingsWritersCollide(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.install(t, 641, 7401)
	wsID := s.workspace(t, "collide")
	s.source(t, wsID, map[string]any{"repository_id": 7401, "tracked_branch": "main"}).MustStatus(t, http.StatusCreated)

	ctx := context.Background()
	tx, err := s.env.DB.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, stmt := range []string{
		`CREATE TEMP TABLE held ON COMMIT DROP AS SELECT * FROM workspace_source_settings WHERE workspace_id = '` + wsID + `'`,
		`UPDATE held SET id = 'src_heldbythetest', version = 2`,
		`INSERT INTO workspace_source_settings SELECT * FROM held`,
	} {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan *apitest.Response, 1)
	go func() {
		done <- s.source(t, wsID, map[string]any{"repository_id": 7401, "tracked_branch": "prod"})
	}()
	// The API's insert of the same number waits on the held row's key.
	deadline := time.Now().Add(30 * time.Second)
	for s.count(t, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
		AND query LIKE '%INSERT INTO workspace_source_settings%'`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the API's writer never waited on the held version")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.Status != http.StatusConflict || res.Code() != "WORKSPACE_SOURCE_SETTINGS_CONFLICT" {
		t.Fatalf("colliding writer: %d %s", res.Status, res.Body)
	}
	if n := s.count(t, `SELECT count(*) FROM workspace_source_settings WHERE workspace_id = $1 AND tracked_branch = 'prod'`, wsID); n != 0 {
		t.Fatal("the colliding writer's settings were written")
	}
	// Its retry reads version 2 and writes version 3.
	var v3 struct {
		Version int `json:"version"`
	}
	s.source(t, wsID, map[string]any{"repository_id": 7401, "tracked_branch": "prod"}).MustStatus(t, http.StatusCreated).Data(t, &v3)
	if v3.Version != 3 {
		t.Fatalf("retry wrote version %d", v3.Version)
	}
}

// hostileArchive is a provider archive as git archive lays it out (a pax
// header, one top-level directory) holding the given entries.
func hostileArchive(t *testing.T, entries ...tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, h := range entries {
		h.Name = "acme-infra-abcdef0/" + h.Name
		body := []byte("resource \"terraform_data\" \"x\" {}\n")
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestProviderArchiveIsValidated: the code-host path applies the upload
// rules to the provider's archive. One declared over 100,000,000 bytes,
// or holding a link, a traversing name or a duplicate path, ends the
// ingestion failed with the rule's code, and leaves no configuration
// version and no run. A valid commit after them still plans.
func TestProviderArchiveIsValidated(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.install(t, 651, 7501)
	wsID := s.workspace(t, "hostile")
	s.source(t, wsID, map[string]any{"repository_id": 7501, "tracked_branch": "main", "working_directory": "infra"}).
		MustStatus(t, http.StatusCreated)
	gh := s.env.Server.Services().GitHub
	ctx := context.Background()
	file := func(name string) tar.Header { return tar.Header{Typeflag: tar.TypeReg, Name: name} }
	valid := hostileArchive(t, file("infra/main.tf"))
	before := strings.Repeat("3", 40)

	ingest := func(sha string) (string, string, *string) {
		t.Helper()
		var push deliveryDoc
		s.deliver(t, githubfake.NewDelivery("push", s.fake.Push(t, 651, 7501, githubfake.PushOptions{Branch: "main",
			Before: before, After: sha, Forced: true}))).MustStatus(t, http.StatusOK).Data(t, &push)
		if len(push.IngestionIDs) != 1 {
			t.Fatalf("push: %+v", push)
		}
		if err := gh.Ingest(ctx, push.IngestionIDs[0]); err != nil {
			t.Fatalf("ingest: %v", err)
		}
		var row struct {
			Status string  `db:"status"`
			Code   *string `db:"failure_code"`
			RunID  *string `db:"run_id"`
		}
		if err := s.env.DB.Get(&row, `SELECT status, failure_code, run_id FROM source_ingestions WHERE id = $1`,
			push.IngestionIDs[0]); err != nil {
			t.Fatal(err)
		}
		code := ""
		if row.Code != nil {
			code = *row.Code
		}
		return row.Status, code, row.RunID
	}
	for name, c := range map[string]struct {
		sha  string
		code string
	}{
		"over the limit": {s.fake.CommitArchive(7501, "main", "huge", valid, run.MaxArchiveBytes+1), "archive_too_large"},
		"a link": {s.fake.CommitWithLinks(7501, "main", "link", map[string]string{"infra/main.tf": "# x\n"},
			map[string]string{"infra/creds.tf": "/etc/shadow"}), "archive_link"},
		"a traversing name": {s.fake.CommitArchive(7501, "main", "traversal",
			hostileArchive(t, file("infra/main.tf"), file("infra/../../../etc/cron.d/x")), 0), "archive_path_traversal"},
		"a duplicate path": {s.fake.CommitArchive(7501, "main", "duplicate",
			hostileArchive(t, file("infra/main.tf"), file("infra/main.tf")), 0), "archive_duplicate_path"},
	} {
		status, code, runID := ingest(c.sha)
		if status != github.IngestionFailed || code != c.code || runID != nil {
			t.Fatalf("%s: ingestion %s with %q (run %v), want failed with %q", name, status, code, runID, c.code)
		}
	}
	if n := s.count(t, `SELECT count(*) FROM configuration_versions WHERE workspace_id = $1`, wsID); n != 0 {
		t.Fatalf("%d configuration versions from refused archives", n)
	}
	if status, code, runID := ingest(s.fake.CommitArchive(7501, "main", "fine", valid, 0)); status != github.IngestionReady || runID == nil {
		t.Fatalf("valid archive: %s %q", status, code)
	}
}

// pinnedCredentials lists the credential versions a run's input snapshot
// pins.
func (s *stack) pinnedCredentials(t *testing.T, runID string) []string {
	t.Helper()
	var snapshot []byte
	if err := s.env.DB.Get(&snapshot, `SELECT input_snapshot FROM runs WHERE id = $1`, runID); err != nil {
		t.Fatal(err)
	}
	var snap struct {
		Credentials []struct {
			VersionID string `json:"version_id"`
		} `json:"credentials"`
	}
	if err := json.Unmarshal(snapshot, &snap); err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, c := range snap.Credentials {
		out = append(out, c.VersionID)
	}
	return out
}

// awsVersion creates a verified aws federation version of a new profile
// of the workspace for phase.
func (s *stack) awsVersion(t *testing.T, workspaceID, phase string, verify bool) string {
	t.Helper()
	var p, v struct{ ID string }
	s.owner.Mutate(http.MethodPost, "/v1/workspaces/"+workspaceID+"/credential-profiles", map[string]any{"provider": "aws"}).
		MustStatus(t, http.StatusCreated).Data(t, &p)
	s.owner.Mutate(http.MethodPost, "/v1/credential-profiles/"+p.ID+"/versions", map[string]any{"phase": phase,
		"configuration": map[string]string{"role_arn": "arn:aws:iam::123456789012:role/" + phase}}).
		MustStatus(t, http.StatusCreated).Data(t, &v)
	if verify {
		s.owner.Mutate(http.MethodPost, "/v1/credential-profiles/"+p.ID+"/versions/"+v.ID+"/actions/verify", nil).
			MustStatus(t, http.StatusOK)
	}
	return v.ID
}

// TestSameRepositoryPullRequestCredentials: a same-repository pull request
// gets no credentials by default even though the workspace has a verified
// plan_and_apply profile (which a push to the tracked branch does get);
// source settings refuse a plan_and_apply or an unverified version as the
// speculative profile; once a verified speculative_plan version is saved,
// a pull request's run pins exactly that version and nothing else.
func TestSameRepositoryPullRequestCredentials(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.install(t, 661, 7601)
	wsID := s.workspace(t, "speculative")
	applyVersion := s.awsVersion(t, wsID, "plan_and_apply", true)
	speculative := s.awsVersion(t, wsID, "speculative_plan", true)
	unverified := s.awsVersion(t, wsID, "speculative_plan", false)
	settings := func(version *string) map[string]any {
		m := map[string]any{"repository_id": 7601, "tracked_branch": "main"}
		if version != nil {
			m["speculative_credential_version_id"] = *version
		}
		return m
	}
	s.source(t, wsID, settings(nil)).MustStatus(t, http.StatusCreated)
	for name, v := range map[string]string{"a plan_and_apply version": applyVersion, "an unverified version": unverified} {
		if res := s.source(t, wsID, settings(&v)); res.Status != http.StatusBadRequest {
			t.Fatalf("%s saved as the speculative profile: %d %s", name, res.Status, res.Body)
		}
	}
	gh := s.env.Server.Services().GitHub
	ctx := context.Background()
	runOf := func(body []byte, event string) string {
		t.Helper()
		var d deliveryDoc
		s.deliver(t, githubfake.NewDelivery(event, body)).MustStatus(t, http.StatusOK).Data(t, &d)
		if len(d.IngestionIDs) != 1 {
			t.Fatalf("%s: %+v", event, d)
		}
		if err := gh.Ingest(ctx, d.IngestionIDs[0]); err != nil {
			t.Fatal(err)
		}
		return run.RunIDOf(d.IngestionIDs[0])
	}
	pull := func(number int) string {
		head := s.fake.Commit(7601, "feature", "feature "+strings.Repeat("x", number), mainTF())
		return runOf(s.fake.PullRequest(t, 661, 7601, githubfake.PullOptions{Number: number, Base: "main", HeadRef: "feature",
			HeadSHA: head}), "pull_request")
	}
	if got := s.pinnedCredentials(t, pull(21)); len(got) != 0 {
		t.Fatalf("a same-repository pull request without a speculative profile pinned %v", got)
	}
	push := runOf(s.fake.Push(t, 661, 7601, githubfake.PushOptions{Branch: "main", Before: strings.Repeat("4", 40),
		After: s.fake.Commit(7601, "main", "tracked", mainTF()), Forced: true}), "push")
	if got := s.pinnedCredentials(t, push); !slices.Contains(got, applyVersion) || slices.Contains(got, speculative) {
		t.Fatalf("the tracked push pinned %v, want the plan_and_apply version %s", got, applyVersion)
	}
	s.source(t, wsID, settings(&speculative)).MustStatus(t, http.StatusCreated)
	if got := s.pinnedCredentials(t, pull(22)); !slices.Equal(got, []string{speculative}) {
		t.Fatalf("a same-repository pull request pinned %v, want only %s", got, speculative)
	}
}
