package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/e2e/devstack"
)

const shownConfig = `terraform {
  cloud {
    hostname     = %q
    organization = %q
    workspaces {
      name = "shown"
    }
  }
}

variable "password" {
  type      = string
  sensitive = true
}

resource "terraform_data" "credential" {
  input = var.password
}

resource "terraform_data" "plain" {
  input = "visible-input"
}
`

const shownSecret = "shown-secret-5e1d-do-not-print"

// tofuDirFor is a working directory whose cloud block and credentials
// point at host, acting with token.
func tofuDirFor(t *testing.T, s *Stack, host, slug, token string) tofuRun {
	t.Helper()
	dir, home := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(fmt.Sprintf(shownConfig, host, slug)), 0o644); err != nil {
		t.Fatal(err)
	}
	return withCredentials(t, tofuRun{bin: tofuBinary(t), dir: dir}, s, home, host, token)
}

// withCredentials is r acting with token for host, from its own CLI
// configuration in home.
func withCredentials(t *testing.T, r tofuRun, s *Stack, home, host, token string) tofuRun {
	t.Helper()
	rc := filepath.Join(home, "tofurc")
	if err := os.WriteFile(rc, []byte(fmt.Sprintf("credentials %q {\n  token = %q\n}\n", host, token)), 0o600); err != nil {
		t.Fatal(err)
	}
	r.env = []string{"HOME=" + home, "TF_CLI_CONFIG_FILE=" + rc, "SSL_CERT_FILE=" + s.TLS.Bundle,
		"TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1", "TF_LOG="}
	return r
}

// startRunIDProxy serves the API on another port of localhost, passing
// everything through except that it reads a run ID spelled run-… as the
// run_… it stands for. OpenTofu loads a saved cloud plan only when its run
// ID starts with "run-" and Cairn's start with "run_" (SPEC §2), so `tofu
// show` of a saved plan cannot reach Cairn unaided; through this proxy, and
// a bookmark spelled its way, the real CLI renders what Cairn serves.
func startRunIDProxy(t *testing.T, s *Stack) string {
	t.Helper()
	ca, err := os.ReadFile(s.TLS.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&url.URL{Scheme: "https", Host: s.APIHost})
			pr.Out.URL.Path = strings.Replace(pr.Out.URL.Path, "/api/v2/runs/run-", "/api/v2/runs/run_", 1)
			pr.Out.URL.RawPath = ""
		},
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}},
	}
	port, err := devstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.ServeTLS(ln, s.TLS.Cert, s.TLS.Key) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "localhost:" + strconv.Itoa(port)
}

// TestSavedCloudPlanShowsWithTheTofuCLI renders a saved cloud plan with
// the real CLI. The plan phase sealed its redacted plan (with the provider
// schemas the renderer needs): `tofu show` of the saved plan renders it,
// the sensitive variable shown as sensitive and its value nowhere, for a
// token with run:read alone. `tofu show -json` reads the raw plan JSON,
// which holds the value in clear: the owner's token gets it, audited, and
// a token without artifact:read_sensitive is refused.
func TestSavedCloudPlanShowsWithTheTofuCLI(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "shown")
	tf := tofuDirFor(t, s, s.APIHost, m.slug, m.token)
	tf.run(t, "init")
	auth := []string{"Authorization", "Bearer " + m.token}
	st, body := call(t, s.Client, http.MethodGet, s.APIURL+"/api/v2/organizations/"+m.slug+"/workspaces/shown", nil, auth...)
	var ws struct {
		Data struct{ ID string } `json:"data"`
	}
	if st != http.StatusOK || json.Unmarshal(body, &ws) != nil {
		t.Fatalf("workspace: %d %s", st, body)
	}
	s.setVariable(t, m, ws.Data.ID, "password", shownSecret, true, false)

	if out := tf.run(t, "plan", "-out=saved.tfplan"); !strings.Contains(out, "Plan: 2 to add") || strings.Contains(out, shownSecret) {
		t.Fatalf("saved plan output:\n%s", out)
	}
	var bookmark map[string]any
	raw, err := os.ReadFile(filepath.Join(tf.dir, "saved.tfplan"))
	if err != nil || json.Unmarshal(raw, &bookmark) != nil {
		t.Fatalf("saved plan bookmark %q: %v", raw, err)
	}
	runID, _ := bookmark["run_id"].(string)
	s.waitRun(t, m, runID, time.Minute, status("awaiting_approval"))
	// OpenTofu refuses the bookmark Cairn's run ID makes.
	if out := tf.fail(t, "show", "saved.tfplan"); !strings.Contains(out, "invalid run ID") {
		t.Fatalf("tofu show of Cairn's bookmark:\n%s", out)
	}

	proxyHost := startRunIDProxy(t, s)
	owner := tofuDirFor(t, s, proxyHost, m.slug, m.token)
	owner.run(t, "init")
	bookmark["run_id"], bookmark["hostname"] = "run-"+strings.TrimPrefix(runID, "run_"), proxyHost
	if err := os.WriteFile(filepath.Join(owner.dir, "saved.tfplan"), mustJSON(bookmark), 0o644); err != nil {
		t.Fatal(err)
	}

	var sa struct{ ID string }
	if st := s.apiJSON(t, http.MethodPost, "/v1/service-accounts", map[string]string{"name": "viewer"}, &sa, m.mutate(uniqueKey("sa"))...); st != http.StatusCreated {
		t.Fatalf("service account: %d", st)
	}
	var issued struct{ Token string }
	if st := s.apiJSON(t, http.MethodPost, "/v1/service-accounts/"+sa.ID+"/tokens", map[string]any{
		"permissions": []string{"organization:read", "workspace:read", "run:read", "state:read"},
		"expires_at":  time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
	}, &issued, m.mutate(uniqueKey("sst"))...); st != http.StatusCreated {
		t.Fatalf("service account token: %d", st)
	}
	viewer := withCredentials(t, owner, s, t.TempDir(), proxyHost, issued.Token)

	shown := viewer.run(t, "show", "-no-color", "saved.tfplan")
	for _, want := range []string{"terraform_data.credential will be created", "(sensitive value)", `"visible-input"`,
		"Plan: 2 to add", runID} {
		if !strings.Contains(shown, want) {
			t.Errorf("tofu show lacks %q:\n%s", want, shown)
		}
	}
	if strings.Contains(shown, shownSecret) {
		t.Fatalf("tofu show printed the sensitive value:\n%s", shown)
	}
	if sensitive := viewer.run(t, "show", "-no-color", "-show-sensitive", "saved.tfplan"); strings.Contains(sensitive, shownSecret) {
		t.Fatalf("tofu show -show-sensitive printed the sensitive value:\n%s", sensitive)
	}

	before := s.sensitiveDownloads(t, m)
	refused := viewer.fail(t, "show", "-json", "saved.tfplan")
	if strings.Contains(refused, shownSecret) || !strings.Contains(refused, "couldn't read plan data") {
		t.Fatalf("tofu show -json without artifact:read_sensitive:\n%s", refused)
	}
	if after := s.sensitiveDownloads(t, m); after != before {
		t.Fatalf("a refused export wrote %d audit events", after-before)
	}
	var planJSON struct {
		FormatVersion   string `json:"format_version"`
		ResourceChanges []struct {
			Address string `json:"address"`
		} `json:"resource_changes"`
	}
	exported := owner.run(t, "show", "-json", "saved.tfplan")
	if err := json.Unmarshal([]byte(strings.TrimSpace(exported)), &planJSON); err != nil || planJSON.FormatVersion == "" ||
		len(planJSON.ResourceChanges) != 2 || !strings.Contains(exported, shownSecret) {
		t.Fatalf("tofu show -json for the owner (%v): %.2000s", err, exported)
	}
	if after := s.sensitiveDownloads(t, m); after != before+1 {
		t.Fatalf("the owner's export wrote %d audit events, want 1", after-before)
	}
}
