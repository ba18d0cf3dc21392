package registry_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/github/githubfake"
	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/registry"
)

const hookSecret = "registry-webhook-secret-0123456789"

// codeHost is a real cairn-api configured as the app the fake code host
// knows, with the owner's organization bound to one installation.
type codeHost struct {
	env   *apitest.Env
	fake  *githubfake.Server
	owner *apitest.User
}

func startCodeHost(t *testing.T, installationID int64, repoIDs ...int64) *codeHost {
	t.Helper()
	fake := githubfake.Start(t)
	env := apitest.New(t, func(s *apitest.Settings) {
		s.Config.GitHubAppID, s.Config.GitHubPrivateKey = fake.AppID, config.Secret(fake.KeyPEM)
		s.Config.GitHubWebhookSecret, s.Config.GitHubAPIURL = hookSecret, fake.URL
		s.Config.GitHubAppSlug = "cairn-test"
		s.Config.GitHubClientID, s.Config.GitHubClientSecret = githubfake.ClientID, config.Secret(githubfake.ClientSecret)
	})
	c := &codeHost{env: env, fake: fake, owner: env.WithOrganization("modules")}
	for _, id := range repoIDs {
		fake.AddRepository(githubfake.Repository{ID: id, Owner: "acme", Name: fmt.Sprintf("mods%d", id)})
	}
	fake.AddInstallation(githubfake.Installation{ID: installationID, AccountLogin: "acme", Repositories: repoIDs})
	var started struct {
		InstallURL string `json:"install_url"`
	}
	c.owner.Mutate(http.MethodPost, "/v1/github/installations/start", nil).MustStatus(t, http.StatusCreated).Data(t, &started)
	u, _ := url.Parse(started.InstallURL)
	q := url.Values{"state": {u.Query().Get("state")}, "installation_id": {fmt.Sprint(installationID)},
		"setup_action": {"install"}, "code": {fake.InstallerCode(installationID)}}
	req, _ := http.NewRequest(http.MethodGet, env.URL+"/v1/github/installations/callback?"+q.Encode(), nil)
	req.Header.Set("Cookie", "__Secure-identity.session_token="+c.owner.Token)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("installation callback: %v %v", err, resp)
	}
	resp.Body.Close()
	return c
}

type delivered struct {
	Result       string   `json:"result"`
	Outcome      string   `json:"outcome"`
	IngestionIDs []string `json:"source_ingestion_ids"`
	Replayed     bool     `json:"replayed"`
}

func (c *codeHost) deliver(t *testing.T, d githubfake.Delivery) delivered {
	t.Helper()
	req, err := d.Request(context.Background(), c.env.URL+"/v1/github/webhooks", hookSecret)
	if err != nil {
		t.Fatal(err)
	}
	header := map[string]string{}
	for k := range req.Header {
		header[k] = req.Header.Get(k)
	}
	var out delivered
	c.env.Anonymous().Do(apitest.Request{Method: http.MethodPost, Path: "/v1/github/webhooks", Body: d.Body,
		Header: header}).MustStatus(t, http.StatusOK).Data(t, &out)
	return out
}

func (c *codeHost) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := c.env.DB.Get(&n, query, args...); err != nil {
		t.Fatal(err)
	}
	return n
}

// principal is the owner as the registry's Go API sees them.
func (c *codeHost) principal() access.Principal {
	return access.Principal{Kind: access.KindUser, ID: c.owner.ID, OrganizationID: c.owner.OrganizationID,
		Role: access.RoleOwner, Permissions: access.PermissionsOf(access.RoleOwner)}
}

// module creates an unbound module through the Go API.
func (c *codeHost) module(t *testing.T, name string) registry.Module {
	t.Helper()
	m, err := c.env.Server.Services().Registry.CreateModule(context.Background(), c.principal(),
		registry.CreateModuleInput{Name: name, Provider: "aws"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (c *codeHost) versions(t *testing.T, moduleID string) map[string]registry.Version {
	t.Helper()
	list, _, err := c.env.Server.Services().Registry.ListVersions(context.Background(), c.principal(), moduleID,
		registry.ListVersionsQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]registry.Version{}
	for _, v := range list {
		out[v.Version] = v
	}
	return out
}

type moduleDoc struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Source *struct {
		RepositoryID int64  `json:"repository_id"`
		Owner        string `json:"owner"`
		Repository   string `json:"repository"`
		Directory    string `json:"directory"`
		TagPrefix    string `json:"tag_prefix"`
	} `json:"source"`
}

func moduleFiles(extra map[string]string) map[string]string {
	files := map[string]string{
		"network/main.tf":             "variable \"cidr\" {\n  type = string\n}\n\noutput \"cidr\" {\n  value = var.cidr\n}\n",
		"network/README.md":           "# network\n",
		"network/modules/sub/main.tf": "resource \"terraform_data\" \"sub\" {}\n",
		"compute/main.tf":             "resource \"terraform_data\" \"compute\" {}\n",
	}
	for k, v := range extra {
		files[k] = v
	}
	return files
}

// TestTagPushPublishesOnce: a module bound to a monorepo's subdirectory
// with a tag prefix publishes a version for a signed push of a matching
// tag, in one acceptance transaction (delivery, ingestion, job, dispatch
// record, audit); a replay dispatches nothing; temporary provider failures
// are retried without publishing; the version is the subdirectory alone,
// with its facts; a non-semver or unprefixed tag publishes nothing; a tag
// whose directory holds a link ends errored with a safe reason.
func TestTagPushPublishesOnce(t *testing.T) {
	t.Parallel()
	c := startCodeHost(t, 901, 9401)
	ctx := context.Background()
	ch := c.env.Server.Services().RegistryCodeHost
	var m moduleDoc
	c.owner.Mutate(http.MethodPost, "/v1/registry/modules", map[string]any{"name": "network", "provider": "aws",
		"source": map[string]any{"repository_id": 9401, "directory": "network/", "tag_prefix": "network/"}}).
		MustStatus(t, http.StatusCreated).Data(t, &m)
	if m.Source == nil || m.Source.Owner != "acme" || m.Source.Directory != "network" || m.Source.TagPrefix != "network/" {
		t.Fatalf("created module: %+v", m)
	}

	sha := c.fake.Commit(9401, "main", "network 1.0.0", moduleFiles(nil))
	c.fake.Tag(9401, "network/v1.0.0", sha)
	d := githubfake.NewDelivery("push", c.fake.TagPush(t, 901, 9401, "network/v1.0.0", sha))
	first := c.deliver(t, d)
	if first.Result != "accepted" || len(first.IngestionIDs) != 1 {
		t.Fatalf("tag push: %+v", first)
	}
	ingID := first.IngestionIDs[0]
	again := c.deliver(t, d)
	if !again.Replayed || !slices.Equal(again.IngestionIDs, first.IngestionIDs) {
		t.Fatalf("replay: %+v", again)
	}
	if n := c.count(t, `SELECT count(*) FROM river_job WHERE kind = 'module_ingestion'`); n != 1 {
		t.Fatalf("%d ingestion jobs after a replay", n)
	}
	if n := c.count(t, `SELECT count(*) FROM workflow_dispatches WHERE id = $1 AND status = 'pending'`,
		registry.IngestionWorkflowID(ingID)); n != 1 {
		t.Fatal("no pending dispatch record")
	}
	if n := c.count(t, `SELECT count(*) FROM audit_events WHERE action = 'registry_module_ingestion.accepted' AND target_id = $1`,
		ingID); n != 1 {
		t.Fatalf("%d acceptance audit events", n)
	}

	// Temporary provider failures: retried, nothing published.
	c.fake.Inject(githubfake.RouteGitRef, githubfake.Fault{Status: http.StatusBadGateway})
	if err := ch.Ingest(ctx, ingID); err == nil {
		t.Fatal("a provider 502 did not fail the attempt")
	}
	c.fake.Inject(githubfake.RouteTarball, githubfake.Fault{Status: http.StatusServiceUnavailable})
	if err := ch.Ingest(ctx, ingID); err == nil {
		t.Fatal("a failed download did not fail the attempt")
	}
	if vs := c.versions(t, m.ID); len(vs) != 0 {
		t.Fatalf("versions after failed attempts: %+v", vs)
	}
	if err := ch.Ingest(ctx, ingID); err != nil {
		t.Fatalf("ingest: %v", err)
	}
	if err := ch.Ingest(ctx, ingID); err != nil {
		t.Fatalf("settled ingest: %v", err)
	}
	v := c.versions(t, m.ID)["1.0.0"]
	if v.Status != registry.VersionOK || v.Origin != registry.OriginTag || v.Tag == nil || *v.Tag != "network/v1.0.0" || v.CommitSHA == nil || *v.CommitSHA != sha {
		t.Fatalf("published version: %+v", v)
	}
	if n := c.count(t, `SELECT count(*) FROM registry_module_versions WHERE module_id = $1`, m.ID); n != 1 {
		t.Fatalf("%d versions", n)
	}
	facts, err := c.env.Server.Services().Registry.Facts(ctx, c.principal(), v.ID)
	if err != nil || facts.README != "# network\n" || len(facts.Inputs) != 1 || facts.Inputs[0].Name != "cidr" ||
		len(facts.Submodules) != 1 {
		t.Fatalf("facts of the subdirectory: %v %+v", err, facts)
	}
	var ing struct {
		Status    string  `db:"status"`
		VersionID *string `db:"version_id"`
		Commit    *string `db:"commit_sha"`
	}
	if err := c.env.DB.Get(&ing, `SELECT status, version_id, commit_sha FROM registry_module_ingestions WHERE id = $1`, ingID); err != nil {
		t.Fatal(err)
	}
	if ing.Status != "published" || ing.VersionID == nil || *ing.VersionID != v.ID || *ing.Commit != sha {
		t.Fatalf("ingestion: %+v", ing)
	}
	if n := c.count(t, `SELECT count(*) FROM workflow_dispatches WHERE id = $1 AND status = 'completed'`,
		registry.IngestionWorkflowID(ingID)); n != 1 {
		t.Fatal("dispatch record not completed")
	}

	// Tags that are not versions under the prefix publish nothing.
	for _, tag := range []string{"network/latest", "v2.0.0", "compute/v1.0.0"} {
		c.fake.Tag(9401, tag, sha)
		got := c.deliver(t, githubfake.NewDelivery("push", c.fake.TagPush(t, 901, 9401, tag, sha)))
		if got.Result != "ignored" || got.Outcome != registry.ReasonTagNotSemver || len(got.IngestionIDs) != 0 {
			t.Fatalf("tag %s: %+v", tag, got)
		}
	}

	// A link in the module's directory: the version ends errored, safely.
	linked := c.fake.CommitWithLinks(9401, "main", "network 1.1.0", moduleFiles(nil), map[string]string{"network/creds": "/etc/shadow"})
	c.fake.Tag(9401, "network/v1.1.0", linked)
	bad := c.deliver(t, githubfake.NewDelivery("push", c.fake.TagPush(t, 901, 9401, "network/v1.1.0", linked)))
	if len(bad.IngestionIDs) != 1 {
		t.Fatalf("linked tag push: %+v", bad)
	}
	if err := ch.Ingest(ctx, bad.IngestionIDs[0]); err != nil {
		t.Fatalf("ingest linked: %v", err)
	}
	errored := c.versions(t, m.ID)["1.1.0"]
	if errored.Status != registry.VersionErrored || errored.ErrorCode == nil || *errored.ErrorCode != "archive_link" ||
		errored.ErrorMessage == nil || strings.Contains(*errored.ErrorMessage, "shadow") {
		t.Fatalf("linked version: %s %v %v", errored.Status, deref(errored.ErrorCode), deref(errored.ErrorMessage))
	}
	if n := c.count(t, `SELECT count(*) FROM registry_module_ingestions WHERE id = $1 AND status = 'errored'
		AND error_code = 'archive_link'`, bad.IngestionIDs[0]); n != 1 {
		t.Fatal("linked ingestion not errored")
	}

	// A repository nobody bound a module to: ignored.
	other := startCodeHost(t, 902, 9402)
	osha := other.fake.Commit(9402, "main", "x", moduleFiles(nil))
	if got := other.deliver(t, githubfake.NewDelivery("push", other.fake.TagPush(t, 902, 9402, "v1.0.0", osha))); got.Outcome != registry.ReasonNoBoundModule {
		t.Fatalf("unbound repository: %+v", got)
	}
}

// TestSyncAndSource: a sync lists every tag and starts publishing the
// matching ones the module lacks, skipping those it has; a module whose
// repository has no matching tag is no_version_tags; the binding changes
// and unbinds through PUT source, which refuses a repository outside the
// installation and another organization's module as missing.
func TestSyncAndSource(t *testing.T) {
	t.Parallel()
	c := startCodeHost(t, 903, 9403, 9404)
	ctx := context.Background()
	ch := c.env.Server.Services().RegistryCodeHost
	var m moduleDoc
	m.ID = c.module(t, "network").ID
	if res := c.owner.Mutate(http.MethodPost, "/v1/registry/modules/"+m.ID+"/actions/sync", nil); res.Status != http.StatusConflict {
		t.Fatalf("sync of an unbound module: %d %s", res.Status, res.Body)
	}
	for _, tc := range []struct {
		body   map[string]any
		status int
	}{
		{map[string]any{"repository_id": 1234}, http.StatusBadRequest},
		{map[string]any{"repository_id": 9403, "directory": "../up"}, http.StatusBadRequest},
		{map[string]any{"repository_id": 9403, "tag_prefix": "bad prefix"}, http.StatusBadRequest},
		{map[string]any{"repository_id": 9403, "tag_prefix": strings.Repeat("p", 101)}, http.StatusBadRequest},
		{map[string]any{"directory": "x"}, http.StatusBadRequest},
	} {
		if res := c.owner.Mutate(http.MethodPut, "/v1/registry/modules/"+m.ID+"/source", tc.body); res.Status != tc.status {
			t.Fatalf("source %v: %d %s", tc.body, res.Status, res.Body)
		}
	}
	stranger := c.env.WithOrganization("elsewhere")
	if res := stranger.Mutate(http.MethodPut, "/v1/registry/modules/"+m.ID+"/source", map[string]any{"repository_id": nil}); res.Status != http.StatusNotFound {
		t.Fatalf("another organization's module: %d %s", res.Status, res.Body)
	}
	c.owner.Mutate(http.MethodPut, "/v1/registry/modules/"+m.ID+"/source", map[string]any{"repository_id": 9403,
		"directory": "network/", "tag_prefix": "network/"}).MustStatus(t, http.StatusOK).Data(t, &m)
	if m.Source == nil || m.Source.RepositoryID != 9403 || m.Source.Directory != "network" {
		t.Fatalf("bound: %+v", m)
	}

	// Nothing to publish yet.
	var res struct {
		Published []string `json:"published"`
		Skipped   []struct {
			Tag    string `json:"tag"`
			Reason string `json:"reason"`
		} `json:"skipped"`
	}
	c.owner.Mutate(http.MethodPost, "/v1/registry/modules/"+m.ID+"/actions/sync", nil).MustStatus(t, http.StatusOK).Data(t, &res)
	if mod, err := c.env.Server.Services().Registry.Module(ctx, c.principal(), m.ID); err != nil || len(res.Published) != 0 ||
		mod.Status != registry.ModuleNoVersionTags {
		t.Fatalf("empty sync: %+v, module %v %+v", res, err, mod)
	}

	sha := c.fake.Commit(9403, "main", "modules", moduleFiles(nil))
	for _, tag := range []string{"network/v1.0.0", "network/v1.1.0", "network/2.0.0-rc.1", "network/nightly", "v9.0.0"} {
		c.fake.Tag(9403, tag, sha)
	}
	// One tag arrives by push first.
	pushed := c.deliver(t, githubfake.NewDelivery("push", c.fake.TagPush(t, 903, 9403, "network/v1.0.0", sha)))
	if err := ch.Ingest(ctx, pushed.IngestionIDs[0]); err != nil {
		t.Fatal(err)
	}
	c.owner.Mutate(http.MethodPost, "/v1/registry/modules/"+m.ID+"/actions/sync", nil).MustStatus(t, http.StatusOK).Data(t, &res)
	if !slices.Equal(res.Published, []string{"1.1.0", "2.0.0-rc.1"}) || len(res.Skipped) != 1 ||
		res.Skipped[0].Tag != "network/v1.0.0" || res.Skipped[0].Reason != registry.ReasonAlreadyIngested {
		t.Fatalf("sync: %+v", res)
	}
	var pending []string
	if err := c.env.DB.Select(&pending, `SELECT id FROM registry_module_ingestions WHERE module_id = $1 AND status = 'pending'
		AND trigger = 'sync' ORDER BY version`, m.ID); err != nil || len(pending) != 2 {
		t.Fatalf("sync ingestions: %v %v", err, pending)
	}
	for _, id := range pending {
		if err := ch.Ingest(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	vs := c.versions(t, m.ID)
	if len(vs) != 3 || vs["1.1.0"].Status != registry.VersionOK || vs["2.0.0-rc.1"].Status != registry.VersionOK {
		t.Fatalf("versions after sync: %+v", vs)
	}
	// A second sync publishes nothing again.
	c.owner.Mutate(http.MethodPost, "/v1/registry/modules/"+m.ID+"/actions/sync", nil).MustStatus(t, http.StatusOK).Data(t, &res)
	if len(res.Published) != 0 || len(res.Skipped) != 3 {
		t.Fatalf("second sync: %+v", res)
	}

	c.owner.Mutate(http.MethodPut, "/v1/registry/modules/"+m.ID+"/source", map[string]any{"repository_id": nil}).
		MustStatus(t, http.StatusOK).Data(t, &m)
	if m.Source != nil {
		t.Fatalf("unbound: %+v", m)
	}
	if n := c.count(t, `SELECT count(*) FROM audit_events WHERE action = 'registry_module.source_changed' AND target_id = $1`, m.ID); n != 2 {
		t.Fatalf("%d source audit events", n)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
