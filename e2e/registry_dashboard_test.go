package e2e

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/cairnhq/cairn/e2e/devstack"
)

// registryModuleFiles is a module with a README that tries to run script,
// two inputs (one with a default), an output, a resource and a submodule.
func registryModuleFiles(note string) map[string]string {
	return map[string]string{
		"README.md": "# Network module\n\nBuilds the network (" + note + ").\n\n<script>window.readmeScript = true</script>\n\n" +
			"[click me](javascript:window.readmeLink=true) and [the docs](https://example.com/docs).\n",
		"main.tf": `variable "cidr" {
  type        = string
  default     = "10.0.0.0/16"
  description = "The VPC range"
}
variable "name" {
  type        = string
  description = "What to call it"
}
resource "terraform_data" "vpc" {
  input = "${var.name}:${var.cidr}"
}
output "vpc_id" {
  value       = terraform_data.vpc.id
  description = "The VPC's ID"
}
`,
		"modules/sub/main.tf": `variable "subnet" {
  type = string
}
output "subnet_id" {
  value = var.subnet
}
`,
	}
}

// registryModuleView is the part of a module the test reads from /v1.
type registryModuleView struct {
	ID            string `json:"id"`
	Namespace     string `json:"namespace"`
	SourceAddress string `json:"source_address"`
}

// registryVersionView is the part of a version the test reads from /v1.
type registryVersionView struct {
	ID          string         `json:"id"`
	Version     string         `json:"version"`
	Status      string         `json:"status"`
	Deprecation map[string]any `json:"deprecation"`
	Revocation  map[string]any `json:"revocation"`
}

func (s *Stack) createRegistryModule(t *testing.T, m member, name, provider string) registryModuleView {
	t.Helper()
	var mod registryModuleView
	if st := s.apiJSON(t, http.MethodPost, "/v1/registry/modules", map[string]string{"name": name, "provider": provider}, &mod,
		m.mutate(uniqueKey("module"))...); st != http.StatusCreated {
		t.Fatalf("creating module %s/%s: %d", name, provider, st)
	}
	return mod
}

func (s *Stack) publishRegistryVersion(t *testing.T, m member, moduleID, version string, files map[string]string) {
	t.Helper()
	st, body := call(t, s.Client, http.MethodPost, s.APIURL+"/v1/registry/modules/"+moduleID+"/versions?version="+url.QueryEscape(version),
		devstack.TarGz(files), append(m.mutate(uniqueKey("module-version")), "Content-Type", "application/gzip")...)
	if st != http.StatusCreated {
		t.Fatalf("publishing %s: %d %s", version, st, body)
	}
}

func (s *Stack) registryVersions(t *testing.T, m member, moduleID string) map[string]registryVersionView {
	t.Helper()
	var list []registryVersionView
	if st := s.apiJSON(t, http.MethodGet, "/v1/registry/modules/"+moduleID+"/versions", nil, &list, m.cookie()...); st != http.StatusOK {
		t.Fatalf("listing versions: %d", st)
	}
	out := map[string]registryVersionView{}
	for _, v := range list {
		out[v.Version] = v
	}
	return out
}

// multipart posts a multipart form with one file part after the fields,
// as a browser sends the registry's upload forms, from origin.
func (d dashboardSession) multipart(t *testing.T, path, origin string, fields map[string]string, file string, content []byte) int {
	t.Helper()
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	for _, k := range []string{"csrf_token", "name", "provider", "version"} {
		if v, ok := fields[k]; ok {
			_ = w.WriteField(k, v)
		}
	}
	part, _ := w.CreateFormFile(file, "module.tar.gz")
	_, _ = part.Write(content)
	_ = w.Close()
	req, _ := http.NewRequest(http.MethodPost, d.base+path, &body)
	req.Header.Set("Content-Type", w.FormDataContentType())
	req.Header.Set("Origin", origin)
	resp, err := d.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestRegistryDashboard: an owner publishes a module with its first
// version from the Registry page and a second from the module page; the
// list searches by name and filters by provider; the module page renders
// the README without its script or javascript: link, the inputs, outputs,
// resources and submodule, and the exact usage snippet; deprecating and
// then revoking a version marks it with each reason. A reader sees the
// same pages without any action, and the API refuses the action the page
// did not offer; a publish form without the session's CSRF token or from
// another origin forwards nothing. Without the API the pages say
// "unavailable", never an empty list.
func TestRegistryDashboard(t *testing.T) {
	t.Parallel()
	s := StartStack(t)
	owner := s.newMember(t, "regowner")
	archive := filepath.Join(t.TempDir(), "network.tar.gz")
	if err := os.WriteFile(archive, devstack.TarGz(registryModuleFiles("first")), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := newBrowser(t)
	signInAs(t, ctx, s, owner.email)
	browse(t, ctx, "publishing a module",
		chromedp.Navigate(s.DashboardURL+"/registry"),
		chromedp.WaitVisible(chromedp.CSS("#publish-module")),
		chromedp.SendKeys(chromedp.CSS("#module-name"), "network"),
		chromedp.SendKeys(chromedp.CSS("#module-provider"), "aws"),
		chromedp.SendKeys(chromedp.CSS("#module-version"), "1.0.0"),
		chromedp.SetUploadFiles(chromedp.CSS("#module-archive"), []string{archive}),
		chromedp.Click(chromedp.CSS("#publish-module button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#readme")),
	)
	waitText(t, ctx, "main .notice", "Version uploaded")
	waitText(t, ctx, "#readme", "Builds the network (first)")
	waitText(t, ctx, "#readme a[href='https://example.com/docs']", "the docs")
	waitText(t, ctx, "#readme", "click me")
	if n := count(t, ctx, "#readme script, #readme a[href^='javascript'], #readme [onclick]"); n != 0 {
		t.Fatalf("the README kept %d script elements or javascript: links", n)
	}
	if ran, _ := chromedp.Run(ctx, chromedp.Evaluate[bool]("window.readmeScript === true")); ran {
		t.Fatal("the README's script ran")
	}
	waitText(t, ctx, "#inputs", "cidr")
	waitText(t, ctx, "#inputs", `"10.0.0.0/16"`)
	waitText(t, ctx, "#inputs", "The VPC range")
	waitText(t, ctx, "#inputs", "required")
	waitText(t, ctx, "#outputs", "vpc_id")
	waitText(t, ctx, "#resources", "terraform_data.vpc")
	waitText(t, ctx, "#submodules", "modules/sub")
	waitText(t, ctx, "#inputs-sub-0", "subnet")

	var modules []registryModuleView
	if st := s.apiJSON(t, http.MethodGet, "/v1/registry/modules", nil, &modules, owner.cookie()...); st != http.StatusOK || len(modules) != 1 {
		t.Fatalf("modules after publishing: %d %+v", st, modules)
	}
	network := modules[0]
	if !strings.HasSuffix(network.SourceAddress, "/"+network.Namespace+"/network/aws") {
		t.Fatalf("source address %q", network.SourceAddress)
	}
	usage, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.querySelector('#usage-snippet').textContent"))
	if want := "module \"network\" {\n  source  = \"" + network.SourceAddress + "\"\n  version = \"1.0.0\"\n}\n"; err != nil || usage != want {
		t.Fatalf("usage snippet %q (%v), want %q", usage, err, want)
	}
	screenshot(t, ctx, "registry-module")

	// A second version from the module page, and a third through the API.
	second := filepath.Join(t.TempDir(), "network-1.1.0.tar.gz")
	if err := os.WriteFile(second, devstack.TarGz(registryModuleFiles("second")), 0o600); err != nil {
		t.Fatal(err)
	}
	browse(t, ctx, "uploading 1.1.0",
		chromedp.SendKeys(chromedp.CSS("#upload-version-number"), "1.1.0"),
		chromedp.SetUploadFiles(chromedp.CSS("#upload-archive"), []string{second}),
		chromedp.Click(chromedp.CSS("#upload-version button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#readme")),
	)
	waitText(t, ctx, "main .notice", "Version uploaded")
	waitText(t, ctx, "#readme", "Builds the network (second)")
	waitText(t, ctx, "#usage-snippet", `version = "1.1.0"`)
	// An archive without configuration ends errored, and the page says why.
	empty := filepath.Join(t.TempDir(), "empty.tar.gz")
	if err := os.WriteFile(empty, devstack.TarGz(map[string]string{"README.md": "# Nothing here\n"}), 0o600); err != nil {
		t.Fatal(err)
	}
	browse(t, ctx, "uploading an archive without configuration",
		chromedp.SendKeys(chromedp.CSS("#upload-version-number"), "0.9.0"),
		chromedp.SetUploadFiles(chromedp.CSS("#upload-archive"), []string{empty}),
		chromedp.Click(chromedp.CSS("#upload-version button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#selected-error")),
	)
	waitText(t, ctx, "main .notice", "archive was refused")
	waitText(t, ctx, "#selected-error", "module_no_configuration")
	if n := count(t, ctx, "#usage-snippet, #readme"); n != 0 {
		t.Fatal("an errored version shows a usage snippet or README")
	}
	s.publishRegistryVersion(t, owner, network.ID, "2.0.0-rc.1", registryModuleFiles("third"))
	versions := s.registryVersions(t, owner, network.ID)
	if len(versions) != 4 || versions["1.0.0"].Status != "ok" || versions["2.0.0-rc.1"].Status != "ok" || versions["0.9.0"].Status != "errored" {
		t.Fatalf("versions %+v", versions)
	}

	// The list: search by name, filter by provider.
	storage := s.createRegistryModule(t, owner, "storage", "gcp")
	browse(t, ctx, "the module list", chromedp.Navigate(s.DashboardURL+"/registry"), chromedp.WaitVisible(chromedp.CSS("#modules")))
	waitText(t, ctx, "#module-"+network.ID, "network")
	waitText(t, ctx, "#module-"+storage.ID, "storage")
	// The search form is a GET of ?q=: load its result directly, since
	// under load a wait after submitting could still see the list before
	// the search, which shows the same module.
	browse(t, ctx, "searching", chromedp.Navigate(s.DashboardURL+"/registry?q=netw"),
		chromedp.WaitVisible(chromedp.CSS("#module-"+network.ID)))
	if count(t, ctx, "#module-"+storage.ID) != 0 {
		t.Fatal("searching for netw lists storage")
	}
	browse(t, ctx, "filtering by provider", chromedp.Navigate(s.DashboardURL+"/registry?provider=gcp"), chromedp.WaitVisible(chromedp.CSS("#module-"+storage.ID)))
	if count(t, ctx, "#module-"+network.ID) != 0 {
		t.Fatal("the gcp filter lists the aws module")
	}
	browse(t, ctx, "searching for nothing", chromedp.Navigate(s.DashboardURL+"/registry?q=nothing-like-it"), chromedp.WaitVisible(chromedp.CSS("#no-modules")))
	screenshot(t, ctx, "registry-list")

	// Deprecate 1.0.0 with a reason, then revoke it with another.
	first := versions["1.0.0"]
	browse(t, ctx, "choosing 1.0.0",
		chromedp.Navigate(s.DashboardURL+"/registry/modules/"+network.ID),
		chromedp.WaitVisible(chromedp.CSS("#select-version")),
		chromedp.SetValue(chromedp.CSS("#select-version"), first.ID),
		chromedp.Submit(chromedp.CSS("#select-version")),
		chromedp.WaitVisible(chromedp.CSS("#selected-version[data-version='1.0.0'] #deprecate-version")),
		chromedp.SendKeys(chromedp.CSS("#deprecate-reason"), "Superseded by 1.1.0"),
		chromedp.Click(chromedp.CSS("#deprecate-version button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#revoke-version")),
	)
	waitText(t, ctx, "main .notice", "Version deprecated")
	waitText(t, ctx, "#version-"+first.ID+" .v-deprecated", "deprecated")
	waitText(t, ctx, "#version-"+first.ID+" .deprecation-reason", "Superseded by 1.1.0")
	waitText(t, ctx, "#selected-deprecation", "Superseded by 1.1.0")
	browse(t, ctx, "revoking 1.0.0",
		chromedp.SendKeys(chromedp.CSS("#revoke-reason"), "Opens the VPC to the world"),
		chromedp.Click(chromedp.CSS("#revoke-version button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#unrevoke-version")),
	)
	waitText(t, ctx, "main .notice", "Version revoked")
	waitText(t, ctx, "#version-"+first.ID+" .v-revoked", "revoked")
	waitText(t, ctx, "#version-"+first.ID+" .revocation-reason", "Opens the VPC to the world")
	waitText(t, ctx, "#selected-revocation", "Opens the VPC to the world")
	waitText(t, ctx, "#select-version", "1.0.0 (revoked)")
	if v := s.registryVersions(t, owner, network.ID)["1.0.0"]; v.Deprecation == nil || v.Revocation == nil {
		t.Fatalf("1.0.0 after deprecating and revoking: %+v", v)
	}
	screenshot(t, ctx, "registry-module-revoked")
	expectNoExceptions(t, ctx)

	// A reader sees the registry and no action; the API refuses the one
	// the page did not offer.
	reader := s.joinAs(t, owner, "regreader", "reader")
	readerCtx := newBrowser(t)
	signInAs(t, readerCtx, s, reader.email)
	switchOrganization(t, readerCtx, s, owner.orgID)
	browse(t, readerCtx, "the reader's registry", chromedp.Navigate(s.DashboardURL+"/registry"), chromedp.WaitVisible(chromedp.CSS("#module-"+network.ID)))
	if count(t, readerCtx, "#publish-module") != 0 || count(t, readerCtx, "#registry-readonly") != 1 {
		t.Fatal("the reader is offered the publish form")
	}
	browse(t, readerCtx, "the reader's module page", chromedp.Navigate(s.DashboardURL+"/registry/modules/"+network.ID), chromedp.WaitVisible(chromedp.CSS("#readme")))
	waitText(t, readerCtx, "#usage-snippet", `version = "1.1.0"`)
	if n := count(t, readerCtx, "main form[method=post]"); n != 0 {
		t.Fatalf("the reader is offered %d registry actions", n)
	}
	expectNoExceptions(t, readerCtx)
	d := signInToDashboard(t, s, reader.email)
	if st, _ := d.form(t, "/organizations/active", map[string]string{"organization_id": owner.orgID}); st != http.StatusSeeOther {
		t.Fatalf("switching organization: %d", st)
	}
	latest := versions["1.1.0"]
	if st, body := d.form(t, "/registry/modules/"+network.ID+"/versions/"+latest.ID+"/deprecate", map[string]string{"reason": "not mine to say"}); st != http.StatusForbidden {
		t.Fatalf("the reader's deprecation: %d\n%s", st, body)
	}
	if v := s.registryVersions(t, owner, network.ID)["1.1.0"]; v.Deprecation != nil {
		t.Fatalf("the reader deprecated 1.1.0: %+v", v)
	}

	// The multipart publish form forwards nothing without the session's
	// CSRF token or from another origin.
	o := signInToDashboard(t, s, owner.email)
	for _, c := range []struct{ csrf, origin string }{{"not-the-token", s.DashboardURL}, {o.csrf, "https://evil.example"}} {
		if st := o.multipart(t, "/registry/modules", c.origin, map[string]string{"csrf_token": c.csrf, "name": "forged", "provider": "aws", "version": "1.0.0"},
			"archive", devstack.TarGz(registryModuleFiles("forged"))); st != http.StatusForbidden {
			t.Fatalf("a publish form with CSRF %q from %s: %d", c.csrf, c.origin, st)
		}
	}
	if st := s.apiJSON(t, http.MethodGet, "/v1/registry/modules?q=forged", nil, &modules, owner.cookie()...); st != http.StatusOK || len(modules) != 0 {
		t.Fatalf("a refused publish form created %+v (%d)", modules, st)
	}

	// Without the API the pages are unavailable, not empty.
	_ = syscall.Kill(-s.PID("api"), syscall.SIGKILL)
	for _, path := range []string{"/registry", "/registry/modules/" + network.ID} {
		browse(t, ctx, "without the API "+path, chromedp.Navigate(s.DashboardURL+path), chromedp.WaitVisible(chromedp.CSS(".unavailable-panel")))
		if n := count(t, ctx, "#modules, #versions, #no-modules"); n != 0 {
			t.Fatalf("%s rendered a list without the API", path)
		}
	}
}
