package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/e2e/devstack"
	"github.com/cairnhq/cairn/jobs/sandbox"
)

// registryDownloadTTL is the stacks' signed archive URL lifetime: long
// enough for a CLI's HEAD and GET right after its download call, short
// enough to watch one expire.
const registryDownloadTTL = 8 * time.Second

// moduleFiles is one published version of the test module: its root
// reports the version, and so does its modules/sub submodule.
func moduleFiles(version string) map[string]string {
	return map[string]string{
		"README.md": "# network\n\nVersion " + version + ".\n",
		"main.tf": `variable "prefix" {
  type    = string
  default = "net"
}

output "version" {
  value = "` + version + `"
}

output "name" {
  value = "${var.prefix}-` + version + `"
}
`,
		"modules/sub/main.tf": `output "version" {
  value = "sub-` + version + `"
}
`,
	}
}

// registryModule is a module published through /v1 and its versions by
// version string.
type registryModule struct {
	ID       string
	Versions map[string]string
}

// publishModule creates a module through /v1 and uploads each version's
// archive; every one must be published.
func (s *Stack) publishModule(t *testing.T, m member, name, provider string, versions ...string) registryModule {
	t.Helper()
	var mod struct{ ID string }
	if st := s.apiJSON(t, http.MethodPost, "/v1/registry/modules", map[string]string{"name": name, "provider": provider},
		&mod, m.mutate(uniqueKey("module"))...); st != http.StatusCreated {
		t.Fatalf("creating module %s/%s: %d", name, provider, st)
	}
	out := registryModule{ID: mod.ID, Versions: map[string]string{}}
	for _, v := range versions {
		out.Versions[v] = s.uploadModuleVersion(t, m, mod.ID, v, devstack.TarGz(moduleFiles(v)))
	}
	return out
}

func (s *Stack) uploadModuleVersion(t *testing.T, m member, moduleID, version string, archive []byte) string {
	t.Helper()
	st, body := call(t, s.Client, http.MethodPost, s.APIURL+"/v1/registry/modules/"+moduleID+"/versions?version="+version,
		archive, append(m.mutate(uniqueKey("version")), "Content-Type", "application/gzip")...)
	var doc struct {
		Data struct{ ID, Status string }
	}
	if st != http.StatusCreated || json.Unmarshal(body, &doc) != nil || doc.Data.Status != "ok" {
		t.Fatalf("publishing %s: %d %s", version, st, body)
	}
	return doc.Data.ID
}

// versionAction deprecates, revokes, … one version through /v1.
func (s *Stack) versionAction(t *testing.T, m member, versionID, action string, body any) {
	t.Helper()
	if st := s.apiJSON(t, http.MethodPost, "/v1/registry/module-versions/"+versionID+"/actions/"+action, body, nil,
		m.mutate(uniqueKey(action))...); st != http.StatusOK {
		t.Fatalf("%s %s: %d", action, versionID, st)
	}
}

// toolchainBinary is a checksum-verified CLI of the toolchain mirror.
func toolchainBinary(t *testing.T, tool, version string) string {
	t.Helper()
	dir := devstack.ToolchainDir(repoRoot(t), tool, version)
	want, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatalf("no %s %s in the toolchain mirror (run `make tools`): %v", tool, version, err)
	}
	got, err := sandbox.FileSHA256(filepath.Join(dir, tool))
	if err != nil || !strings.HasPrefix(string(want), got) {
		t.Fatalf("%s checksum mismatch (%v)", tool, err)
	}
	return filepath.Join(dir, tool)
}

// registryCLI is a CLI in a fresh directory whose configuration is main,
// with token (if any) as its credentials for the stack's host.
func registryCLI(t *testing.T, s *Stack, bin, token, main string) tofuRun {
	t.Helper()
	dir, home := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	rc := filepath.Join(home, "cli.tfrc")
	config := ""
	if token != "" {
		config = fmt.Sprintf("credentials %q {\n  token = %q\n}\n", s.APIHost, token)
	}
	if err := os.WriteFile(rc, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return tofuRun{bin: bin, dir: dir, env: []string{
		"HOME=" + home, "TF_CLI_CONFIG_FILE=" + rc, "SSL_CERT_FILE=" + s.TLS.Bundle,
		"TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1", "TF_LOG=",
	}}
}

// consumerConfig uses the module four ways: a pessimistic constraint, a
// lower bound (which a prerelease never satisfies), an exact prerelease
// pin and the submodule of an exact version.
func consumerConfig(host, org string) string {
	src := host + "/" + org + "/network/aws"
	return fmt.Sprintf(`module "tilde" {
  source  = %[1]q
  version = "~> 1.0"
}

module "floor" {
  source  = %[1]q
  version = ">= 1.0.0"
}

module "rc" {
  source  = %[1]q
  version = "2.0.0-rc.1"
}

module "sub" {
  source  = "%[1]s//modules/sub"
  version = "1.0.0"
}

output "versions" {
  value = [module.tilde.version, module.floor.version, module.rc.version, module.sub.version]
}
`, src)
}

// checkInstalled reads .terraform/modules/modules.json after init: each
// module call resolved to the expected version, and its directory holds
// exactly the files the registry serves for that version.
func checkInstalled(t *testing.T, cli tofuRun, served map[string]map[string]string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(cli.dir, ".terraform", "modules", "modules.json"))
	if err != nil {
		t.Fatal(err)
	}
	var manifest struct {
		Modules []struct{ Key, Source, Version, Dir string }
	}
	if err := json.Unmarshal(raw, &manifest); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"tilde": "1.1.0", "floor": "1.1.0", "rc": "2.0.0-rc.1", "sub": "1.0.0"}
	got := map[string]string{}
	for _, mod := range manifest.Modules {
		if mod.Key == "" {
			continue
		}
		got[mod.Key] = mod.Version
		version, ok := want[mod.Key]
		if !ok {
			t.Errorf("unexpected module %q in modules.json", mod.Key)
			continue
		}
		files := served[version]
		dir := filepath.Join(cli.dir, mod.Dir)
		if mod.Key == "sub" {
			if !strings.HasSuffix(mod.Source, "//modules/sub") || !strings.HasSuffix(filepath.ToSlash(mod.Dir), "/modules/sub") {
				t.Errorf("submodule recorded as %+v", mod)
			}
			// The submodule's directory is inside the unpacked package.
			dir = strings.TrimSuffix(dir, filepath.FromSlash("/modules/sub"))
		}
		if unpacked := readTree(t, dir); !equalFiles(unpacked, files) {
			t.Errorf("%s (%s): unpacked files %v differ from the served archive %v", mod.Key, version, keys(unpacked), keys(files))
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("modules.json: %s resolved to %q, want %q (%s)", k, got[k], v, raw)
		}
	}
}

// readTree reads every regular file under dir by slash path.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		body, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		out[filepath.ToSlash(rel)] = string(body)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// untarGz reads a served archive's regular files.
func untarGz(t *testing.T, archive []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			body, _ := io.ReadAll(tr)
			out[strings.TrimPrefix(h.Name, "./")] = string(body)
		}
	}
}

func equalFiles(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// downloadLocation asks modules.v1 for a version's archive URL.
func (s *Stack) downloadLocation(t *testing.T, token, org, version string) (int, string) {
	t.Helper()
	var auth []string
	if token != "" {
		auth = []string{"Authorization", "Bearer " + token}
	}
	st, header, body := callWithHeader(t, s.Client, http.MethodGet, s.APIURL+"/api/registry/v1/modules/"+org+"/network/aws/"+version+"/download", nil, auth...)
	if st == http.StatusNoContent && len(body) != 0 {
		t.Fatalf("a 204 download answer with a body: %s", body)
	}
	return st, header.Get("X-Terraform-Get")
}

// listedVersions is modules.v1's version list, with deprecation reasons.
func (s *Stack) listedVersions(t *testing.T, token, org string) map[string]*string {
	t.Helper()
	st, body := call(t, s.Client, http.MethodGet, s.APIURL+"/api/registry/v1/modules/"+org+"/network/aws/versions", nil, "Authorization", "Bearer "+token)
	var doc struct {
		Modules []struct {
			Source   string
			Versions []struct {
				Version     string
				Deprecation *struct{ Reason string }
			}
		}
	}
	if st != http.StatusOK || json.Unmarshal(body, &doc) != nil || len(doc.Modules) != 1 || doc.Modules[0].Source != org+"/network/aws" {
		t.Fatalf("versions: %d %s", st, body)
	}
	out := map[string]*string{}
	for _, v := range doc.Modules[0].Versions {
		var reason *string
		if v.Deprecation != nil {
			reason = &v.Deprecation.Reason
		}
		out[v.Version] = reason
	}
	return out
}

// TestRegistryModulesWithTheCLIs publishes three versions of a module with
// a submodule through /v1 and consumes them with the real OpenTofu 1.10.6
// and Terraform 1.5.7 through modules.v1: constraints resolve as the CLIs
// define them (a prerelease only by exact pin), modules.json records the
// versions and the unpacked files are the served archive's. The signed
// archive URL answers HEAD and GET with any query, and refuses a changed
// byte and an expired grant; without a token, or with another
// organization's, init fails; a revoked version leaves the list.
func TestRegistryModulesWithTheCLIs(t *testing.T) {
	t.Parallel()
	s := StartStack(t, WithTLS(), WithDottedHost(), WithEnv(fmt.Sprintf("CAIRN_REGISTRY_DOWNLOAD_TTL=%s", registryDownloadTTL)))
	m := s.newMember(t, "registry")
	mod := s.publishModule(t, m, "network", "aws", "1.0.0", "1.1.0", "2.0.0-rc.1")

	_, body := call(t, s.Client, http.MethodGet, s.APIURL+"/.well-known/terraform.json", nil)
	var disco map[string]any
	if json.Unmarshal(body, &disco) != nil || disco["modules.v1"] != "/api/registry/v1/modules/" {
		t.Fatalf("discovery: %s", body)
	}

	// The archive each version is served as, through its signed URL: HEAD
	// (what go-getter sends first) and then GET, with the query go-getter
	// may add, give the same bytes the version's digest names.
	served := map[string]map[string]string{}
	for v, id := range mod.Versions {
		st, loc := s.downloadLocation(t, m.token, m.slug, v)
		if st != http.StatusNoContent || !strings.HasPrefix(loc, "/api/registry/v1/_dl/") || !strings.HasSuffix(loc, ".tar.gz") {
			t.Fatalf("download %s: %d %q", v, st, loc)
		}
		hst, header, _ := callWithHeader(t, s.Client, http.MethodHead, s.APIURL+loc, nil)
		gst, gheader, archive := callWithHeader(t, s.Client, http.MethodGet, s.APIURL+loc+"?archive=tar.gz&terraform-get=1", nil)
		if hst != http.StatusOK || gst != http.StatusOK || header.Get("Content-Length") != fmt.Sprint(len(archive)) ||
			gheader.Get("Accept-Ranges") != "none" {
			t.Fatalf("%s archive: HEAD %d (length %s), GET %d (%d bytes, Accept-Ranges %q)", v, hst, header.Get("Content-Length"), gst,
				len(archive), gheader.Get("Accept-Ranges"))
		}
		var view struct {
			ArchiveSHA256 string `json:"archive_sha256"`
		}
		s.apiJSON(t, http.MethodGet, "/v1/registry/module-versions/"+id, nil, &view, m.cookie()...)
		if sum := sha256.Sum256(archive); hex.EncodeToString(sum[:]) != view.ArchiveSHA256 {
			t.Fatalf("%s: served archive digest %x, version records %s", v, sum, view.ArchiveSHA256)
		}
		served[v] = untarGz(t, archive)
		if !equalFiles(served[v], moduleFiles(v)) {
			t.Fatalf("%s: the served archive holds %v", v, keys(served[v]))
		}
	}

	// One byte of the signed path changed, anywhere: refused.
	_, loc := s.downloadLocation(t, m.token, m.slug, "1.1.0")
	signedBy := time.Now()
	token := strings.TrimSuffix(strings.TrimPrefix(loc, "/api/registry/v1/_dl/"), ".tar.gz")
	for _, i := range []int{0, strings.Index(token, ".") + 5, len(token) - 70, len(token) - 1} {
		b := []byte(token)
		b[i] ^= 1
		if st, _ := call(t, s.Client, http.MethodGet, s.APIURL+"/api/registry/v1/_dl/"+string(b)+".tar.gz", nil); st != http.StatusNotFound {
			t.Errorf("a path with byte %d changed answered %d", i, st)
		}
	}

	for _, cli := range []struct{ name, bin string }{
		{"tofu", tofuBinary(t)},
		{"terraform", toolchainBinary(t, "terraform", "1.5.7")},
	} {
		t.Run(cli.name, func(t *testing.T) {
			run := registryCLI(t, s, cli.bin, m.token, consumerConfig(s.APIHost, m.slug))
			run.run(t, "init", "-no-color")
			checkInstalled(t, run, served)
			run.run(t, "apply", "-auto-approve", "-no-color")
			var out struct{ Value []string }
			if err := json.Unmarshal([]byte(run.run(t, "output", "-json", "versions")), &out.Value); err != nil {
				t.Fatal(err)
			}
			if strings.Join(out.Value, ",") != "1.1.0,1.1.0,2.0.0-rc.1,sub-1.0.0" {
				t.Fatalf("outputs %v", out.Value)
			}

			// Without a token the lookup is unauthorized; with another
			// organization's the module is not found, as a missing one.
			anonymous := registryCLI(t, s, cli.bin, "", consumerConfig(s.APIHost, m.slug))
			if said := anonymous.fail(t, "init", "-no-color"); !strings.Contains(said, "401 Unauthorized") {
				t.Errorf("init without a token said:\n%s", said)
			}
			other := s.newMember(t, "stranger")
			foreign := registryCLI(t, s, cli.bin, other.token, consumerConfig(s.APIHost, m.slug))
			if said := foreign.fail(t, "init", "-no-color"); !strings.Contains(said, "Module not found") {
				t.Errorf("init with another organization's token said:\n%s", said)
			}
			missing := registryCLI(t, s, cli.bin, other.token, consumerConfig(s.APIHost, other.slug))
			if said := missing.fail(t, "init", "-no-color"); !strings.Contains(said, "Module not found") {
				t.Errorf("init of a module that does not exist said:\n%s", said)
			}
		})
	}

	// The anonymous answers themselves: 401 with a challenge, and for
	// another organization exactly what a missing module gets.
	st, header, _ := callWithHeader(t, s.Client, http.MethodGet, s.APIURL+"/api/registry/v1/modules/"+m.slug+"/network/aws/versions", nil)
	if st != http.StatusUnauthorized || !strings.HasPrefix(header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("versions without a token: %d %q", st, header.Get("WWW-Authenticate"))
	}
	other := s.newMember(t, "other")
	_, missing := call(t, s.Client, http.MethodGet, s.APIURL+"/api/registry/v1/modules/"+m.slug+"/nothing/aws/versions", nil,
		"Authorization", "Bearer "+m.token)
	for _, path := range []string{m.slug + "/network/aws/versions", m.slug + "/network/aws/1.1.0/download", other.slug + "/network/aws/versions",
		m.slug + "/network/aws/9.9.9/download"} {
		st, body := call(t, s.Client, http.MethodGet, s.APIURL+"/api/registry/v1/modules/"+path, nil, "Authorization", "Bearer "+other.token)
		if st != http.StatusNotFound || !bytes.Equal(body, missing) || !strings.HasPrefix(string(body), `{"errors":[`) {
			t.Errorf("%s with another organization's token: %d %s, a missing module: %s", path, st, body, missing)
		}
	}

	// A revoked version leaves the list and cannot be downloaded; a
	// deprecated one stays, with its reason.
	s.versionAction(t, m, mod.Versions["1.0.0"], "deprecate", map[string]string{"reason": "use 1.1"})
	if reason := s.listedVersions(t, m.token, m.slug)["1.0.0"]; reason == nil || *reason != "use 1.1" {
		t.Fatalf("deprecated 1.0.0 listed with %v", reason)
	}
	s.versionAction(t, m, mod.Versions["1.0.0"], "revoke", map[string]string{"reason": "broken"})
	if listed := s.listedVersions(t, m.token, m.slug); len(listed) != 2 || listed["1.1.0"] != nil || listed["2.0.0-rc.1"] != nil {
		t.Fatalf("after revoking 1.0.0 the list is %v", listed)
	}
	if st, _ := s.downloadLocation(t, m.token, m.slug, "1.0.0"); st != http.StatusNotFound {
		t.Fatalf("download of a revoked version: %d", st)
	}

	// The grant signed earlier has expired by now, or does shortly; until
	// then it still works.
	if time.Since(signedBy) < registryDownloadTTL-2*time.Second {
		if st, _ := call(t, s.Client, http.MethodGet, s.APIURL+loc, nil); st != http.StatusOK {
			t.Fatalf("a live archive URL answered %d", st)
		}
	}
	// Its expiry, rounded up to the second, is at most a second later
	// than the TTL; it is refused once that second has passed.
	time.Sleep(time.Until(signedBy.Add(registryDownloadTTL + 2200*time.Millisecond)))
	if st, _ := call(t, s.Client, http.MethodGet, s.APIURL+loc, nil); st != http.StatusNotFound {
		t.Fatalf("an expired archive URL answered %d", st)
	}
	if strings.Contains(s.Logs(), m.token) || strings.Contains(s.Logs(), token) {
		t.Fatal("process logs carry a token or an archive grant")
	}
}

// TestManagedRunUsesRegistryModules plans and applies a configuration
// that uses a private registry module in the sandbox, with no credentials
// configured by anyone: the run token reads the registry. The version is
// deprecated, so both phases' logs warn with its reason, and the run's
// evidence names the version it downloaded even after it is revoked.
func TestManagedRunUsesRegistryModules(t *testing.T) {
	t.Parallel()
	tofuBinary(t)
	mirror := filepath.Dir(filepath.Dir(devstack.ToolchainDir(repoRoot(t), "tofu", "1.10.6")))
	s := StartStack(t, WithTLS(), WithDottedHost(), WithEnv("CAIRN_TOOLCHAIN_DIR="+mirror))
	m := s.newMember(t, "modrun")
	mod := s.publishModule(t, m, "network", "aws", "1.1.0")
	s.versionAction(t, m, mod.Versions["1.1.0"], "deprecate", map[string]string{"reason": "move to 2.x\nWarning: forged"})

	ws := s.createWorkspace(t, m, "modrun", "us")
	cfg := s.uploadConfiguration(t, m, ws, map[string]string{"main.tf": fmt.Sprintf(`module "net" {
  source  = "%s/%s/network/aws"
  version = "~> 1.0"
  prefix  = "managed"
}

resource "terraform_data" "uses" {
  input = module.net.name
}
`, s.APIHost, m.slug)})
	_, r := s.createRun(t, m, ws, cfg, "plan_and_apply")
	r = s.waitRun(t, m, r.ID, 2*time.Minute, status("awaiting_approval", "errored", "plan_failed"))
	if r.Status != "awaiting_approval" {
		t.Fatalf("plan: %+v\n%s", r, s.logsOf(t, m, r.ID))
	}
	s.approveAndWait(t, m, r)

	logs := s.logsOf(t, m, r.ID)
	warning := "Warning: registry module " + m.slug + "/network/aws version 1.1.0 is deprecated: move to 2.x Warning: forged"
	if n := strings.Count(logs, warning); n != 2 {
		t.Fatalf("the deprecation warning appears %d times, want once per phase:\n%s", n, logs)
	}
	if !strings.Contains(logs, "managed-1.1.0") {
		t.Fatalf("the apply did not use the module's output:\n%s", logs)
	}

	evidence := func() []map[string]any {
		var review struct {
			Evidence struct {
				RegistryModules []map[string]any `json:"registry_modules"`
			} `json:"evidence"`
		}
		s.apiJSON(t, http.MethodGet, "/v1/runs/"+r.ID, nil, &review, m.cookie()...)
		return review.Evidence.RegistryModules
	}
	before := evidence()
	phases := map[string]bool{}
	for _, e := range before {
		if e["address"] != m.slug+"/network/aws" || e["version"] != "1.1.0" || e["version_id"] != mod.Versions["1.1.0"] ||
			e["deprecated"] != true || len(fmt.Sprint(e["archive_sha256"])) != 64 {
			t.Fatalf("evidence %+v", e)
		}
		phases[fmt.Sprint(e["phase"])] = true
	}
	if len(before) != 2 || !phases["plan"] || !phases["apply"] {
		t.Fatalf("evidence %+v: want one download per phase", before)
	}
	s.versionAction(t, m, mod.Versions["1.1.0"], "revoke", map[string]string{"reason": "withdrawn"})
	if after := evidence(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("revocation changed the run's evidence: %+v", after)
	}
}
