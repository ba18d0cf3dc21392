package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/github/githubfake"
)

const registryRepo, registryInstallation = 9201, 4201

// registryCodeHost is the real binaries configured as the fake code
// host's app, with one installation (a monorepo of modules) bound to a
// member's organization.
type registryCodeHost struct {
	*Stack
	fake *githubfake.Server
	m    member
}

func startRegistryCodeHost(t *testing.T) *registryCodeHost {
	t.Helper()
	fake := githubfake.Start(t)
	s := StartStack(t, WithEnv("CAIRN_GITHUB_APP_ID="+fmt.Sprint(fake.AppID), "CAIRN_GITHUB_PRIVATE_KEY="+string(fake.KeyPEM),
		"CAIRN_GITHUB_WEBHOOK_SECRET="+codeHostSecret, "CAIRN_GITHUB_API_URL="+fake.URL, "CAIRN_GITHUB_APP_SLUG=cairn-e2e",
		"CAIRN_GITHUB_CLIENT_ID="+githubfake.ClientID, "CAIRN_GITHUB_CLIENT_SECRET="+githubfake.ClientSecret))
	c := &registryCodeHost{Stack: s, fake: fake, m: s.newMember(t, "modules")}
	fake.AddRepository(githubfake.Repository{ID: registryRepo, Owner: "acme", Name: "modules"})
	fake.AddInstallation(githubfake.Installation{ID: registryInstallation, AccountLogin: "acme", Repositories: []int64{registryRepo}})
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
	q := url.Values{"state": {u.Query().Get("state")}, "installation_id": {fmt.Sprint(registryInstallation)},
		"setup_action": {"install"}, "code": {fake.InstallerCode(registryInstallation)}}
	req, _ := http.NewRequest(http.MethodGet, s.APIURL+"/v1/github/installations/callback?"+q.Encode(), nil)
	cookie := c.m.cookie()
	req.Header.Set(cookie[0], cookie[1])
	resp, err := (&http.Client{Transport: s.Client.Transport, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("installation callback: %d", resp.StatusCode)
	}
	return c
}

type tagDelivery struct {
	Result       string   `json:"result"`
	Outcome      string   `json:"outcome"`
	IngestionIDs []string `json:"source_ingestion_ids"`
	Replayed     bool     `json:"replayed"`
}

// deliver posts a signed delivery as the provider does and reads the
// receiver's answer.
func (c *registryCodeHost) deliver(t *testing.T, d githubfake.Delivery) tagDelivery {
	t.Helper()
	req, err := d.Request(context.Background(), c.APIURL+"/v1/github/webhooks", codeHostSecret)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var env struct {
		Data tagDelivery `json:"data"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &env) != nil {
		t.Fatalf("delivery: %d %s", resp.StatusCode, raw)
	}
	return env.Data
}

type registryVersion struct {
	ID        string  `json:"id"`
	Version   string  `json:"version"`
	Status    string  `json:"status"`
	Origin    string  `json:"origin"`
	Tag       *string `json:"tag"`
	CommitSHA *string `json:"commit_sha"`
	Error     *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (c *registryCodeHost) versions(t *testing.T, moduleID string) map[string]registryVersion {
	t.Helper()
	var list []registryVersion
	if st := c.apiJSON(t, http.MethodGet, "/v1/registry/modules/"+moduleID+"/versions?limit=100", nil, &list, c.m.cookie()...); st != http.StatusOK {
		t.Fatalf("versions: %d", st)
	}
	out := map[string]registryVersion{}
	for _, v := range list {
		out[v.Version] = v
	}
	return out
}

// settled waits until every listed version of the module is published or
// errored.
func (c *registryCodeHost) settled(t *testing.T, moduleID string, want ...string) map[string]registryVersion {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		vs := c.versions(t, moduleID)
		done := true
		for _, w := range want {
			if v, ok := vs[w]; !ok || v.Status == "pending" {
				done = false
			}
		}
		if done {
			return vs
		}
		if time.Now().After(deadline) {
			t.Fatalf("versions %v did not settle: %+v", want, vs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var codehostModuleFiles = map[string]string{
	"network/main.tf":             "variable \"cidr\" {\n  type    = string\n  default = \"10.0.0.0/16\"\n}\n\noutput \"cidr\" {\n  value = var.cidr\n}\n",
	"network/README.md":           "# network\n",
	"network/modules/sub/main.tf": "resource \"terraform_data\" \"sub\" {}\n",
	"compute/main.tf":             "resource \"terraform_data\" \"compute\" {}\n",
}

// TestRegistryPublishesFromTheCodeHost: against the real binaries and the
// code-host fake, a module bound to a monorepo's subdirectory with a tag
// prefix publishes a version for a signed tag push (ok, with its facts
// read from that subdirectory alone); a replayed delivery publishes
// nothing twice; a non-semver tag publishes nothing; a tag whose
// directory holds a symlink ends errored with a safe reason; a sync
// publishes the matching tags no push announced.
func TestRegistryPublishesFromTheCodeHost(t *testing.T) {
	t.Parallel()
	c := startRegistryCodeHost(t)
	var mod struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if st := c.apiJSON(t, http.MethodPost, "/v1/registry/modules", map[string]any{"name": "network", "provider": "aws"},
		&mod, c.m.mutate(uniqueKey("module"))...); st != http.StatusCreated {
		t.Fatalf("create module: %d", st)
	}
	if st := c.apiJSON(t, http.MethodPut, "/v1/registry/modules/"+mod.ID+"/source", map[string]any{"repository_id": registryRepo,
		"directory": "network", "tag_prefix": "network/"}, nil, c.m.mutate(uniqueKey("source"))...); st != http.StatusOK {
		t.Fatalf("bind module: %d", st)
	}

	sha := c.fake.Commit(registryRepo, "main", "network 1.0.0", codehostModuleFiles)
	c.fake.Tag(registryRepo, "network/v1.0.0", sha)
	d := githubfake.NewDelivery("push", c.fake.TagPush(t, registryInstallation, registryRepo, "network/v1.0.0", sha))
	first := c.deliver(t, d)
	if first.Result != "accepted" || len(first.IngestionIDs) != 1 {
		t.Fatalf("tag push: %+v", first)
	}
	v := c.settled(t, mod.ID, "1.0.0")["1.0.0"]
	if v.Status != "ok" || v.Origin != "tag" || v.Tag == nil || *v.Tag != "network/v1.0.0" || v.CommitSHA == nil || *v.CommitSHA != sha {
		t.Fatalf("published version: %+v", v)
	}
	var facts struct {
		Readme string `json:"readme"`
		Inputs []struct {
			Name string `json:"name"`
		} `json:"inputs"`
		Outputs []struct {
			Name string `json:"name"`
		} `json:"outputs"`
		Submodules []struct {
			Path string `json:"path"`
		} `json:"submodules"`
	}
	if st := c.apiJSON(t, http.MethodGet, "/v1/registry/module-versions/"+v.ID+"/facts", nil, &facts, c.m.cookie()...); st != http.StatusOK {
		t.Fatalf("facts: %d", st)
	}
	if facts.Readme != "# network\n" || len(facts.Inputs) != 1 || facts.Inputs[0].Name != "cidr" || len(facts.Outputs) != 1 ||
		len(facts.Submodules) != 1 {
		t.Fatalf("facts: %+v", facts)
	}
	var m struct {
		Status string `json:"status"`
	}
	c.apiJSON(t, http.MethodGet, "/v1/registry/modules/"+mod.ID, nil, &m, c.m.cookie()...)
	if m.Status != "setup_complete" {
		t.Fatalf("module status: %s", m.Status)
	}

	// The same delivery again: the recorded answer, nothing published twice.
	again := c.deliver(t, d)
	if !again.Replayed || !slices.Equal(again.IngestionIDs, first.IngestionIDs) {
		t.Fatalf("replay: %+v", again)
	}
	// A non-semver tag: ignored.
	c.fake.Tag(registryRepo, "network/latest", sha)
	if got := c.deliver(t, githubfake.NewDelivery("push", c.fake.TagPush(t, registryInstallation, registryRepo, "network/latest", sha))); got.Result != "ignored" || got.Outcome != "tag_not_semver" {
		t.Fatalf("non-semver tag: %+v", got)
	}

	// A symlink in the module's directory: errored, with a safe reason.
	linked := c.fake.CommitWithLinks(registryRepo, "main", "network 1.1.0", codehostModuleFiles,
		map[string]string{"network/credentials": "/etc/shadow"})
	c.fake.Tag(registryRepo, "network/v1.1.0", linked)
	if got := c.deliver(t, githubfake.NewDelivery("push", c.fake.TagPush(t, registryInstallation, registryRepo, "network/v1.1.0", linked))); got.Result != "accepted" {
		t.Fatalf("linked tag: %+v", got)
	}
	bad := c.settled(t, mod.ID, "1.1.0")["1.1.0"]
	if bad.Status != "errored" || bad.Error == nil || bad.Error.Code != "archive_link" || strings.Contains(bad.Error.Message, "shadow") {
		t.Fatalf("linked version: %+v", bad)
	}

	// Tags no push announced: a sync publishes the matching ones.
	later := c.fake.Commit(registryRepo, "main", "network 1.2.0", codehostModuleFiles)
	c.fake.Tag(registryRepo, "network/v1.2.0", later)
	c.fake.Tag(registryRepo, "network/v2.0.0-rc.1", later)
	c.fake.Tag(registryRepo, "v9.9.9", later)
	var synced struct {
		Published []string `json:"published"`
		Skipped   []struct {
			Tag    string `json:"tag"`
			Reason string `json:"reason"`
		} `json:"skipped"`
	}
	if st := c.apiJSON(t, http.MethodPost, "/v1/registry/modules/"+mod.ID+"/actions/sync", nil, &synced,
		c.m.mutate(uniqueKey("sync"))...); st != http.StatusOK {
		t.Fatalf("sync: %d", st)
	}
	if !slices.Equal(synced.Published, []string{"1.2.0", "2.0.0-rc.1"}) || len(synced.Skipped) != 2 {
		t.Fatalf("sync: %+v", synced)
	}
	vs := c.settled(t, mod.ID, "1.2.0", "2.0.0-rc.1")
	if vs["1.2.0"].Status != "ok" || vs["2.0.0-rc.1"].Status != "ok" || len(vs) != 4 {
		t.Fatalf("versions after sync: %+v", vs)
	}
}
