package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// httpSurfaces are the packages only cairn-api serves with: its HTTP
// framework, the OpenAPI layer, the handlers of /v1 and /api/v2, and the
// sign-in stack (the agents' OAuth server, SAML, OpenID Connect, SCIM). The
// worker runs jobs; linking these would only make it bigger, and every
// package linked is start-up work and resident pages of an idle worker.
var httpSurfaces = []string{
	"github.com/gofiber/",
	"github.com/valyala/fasthttp",
	"github.com/danielgtaylor/huma",
	"github.com/cairnhq/cairn/api/server",
	"github.com/cairnhq/cairn/api/v1",
	"github.com/cairnhq/cairn/api/tfe",
	"github.com/cairnhq/cairn/api/modulesv1",
	"github.com/cairnhq/cairn/api/authserver",
	"github.com/cairnhq/cairn/api/operator",
	"github.com/cairnhq/cairn/api/platform/httpx",
	"github.com/cairnhq/cairn/bff/",
	"github.com/cairnhq/cairn/api/oauth",
	"github.com/cairnhq/cairn/api/sso",
	"github.com/cairnhq/cairn/api/scim",
	"github.com/crewjam/saml",
	"github.com/coreos/go-oidc",
	"github.com/elimity-com/scim",
}

// surfaces returns the lines of list naming a package (or module) of the
// HTTP surfaces.
func surfaces(list string) []string {
	var found []string
	for _, line := range strings.Split(list, "\n") {
		for _, f := range strings.Fields(line) {
			for _, s := range httpSurfaces {
				if strings.HasSuffix(s, "/") && strings.HasPrefix(f, s) || f == s || strings.HasPrefix(f, s+"/") {
					found = append(found, f)
				}
			}
		}
	}
	return found
}

// TestWorkerLinksNoHTTPSurface: cairn-worker's dependency graph holds none
// of the API's HTTP surfaces, and neither does a built binary when the test
// runner provides one (CAIRN_BIN_DIR): the worker assembles its services
// through api/assembly/domain, never through api/server or api/assembly.
func TestWorkerLinksNoHTTPSurface(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "github.com/cairnhq/cairn/api/assembly/domain") {
		t.Fatalf("the worker no longer assembles through api/assembly/domain; the check below would prove nothing:\n%s", out)
	}
	if found := surfaces(string(out)); len(found) > 0 {
		t.Fatalf("cairn-worker depends on HTTP surfaces: %v", found)
	}
	dir := os.Getenv("CAIRN_BIN_DIR")
	if dir == "" {
		return
	}
	bin := filepath.Join(dir, "cairn-worker")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("no built worker to inspect: %v", err)
	}
	out, err = exec.Command("go", "version", "-m", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go version -m: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "github.com/riverqueue/river") {
		t.Fatalf("go version -m listed no modules:\n%s", out)
	}
	if found := surfaces(string(out)); len(found) > 0 {
		t.Fatalf("%s links HTTP surfaces: %v", bin, found)
	}
}

// TestSurfacesFindsTheAPIsFramework: the check above recognizes what it
// looks for, in both listings' shapes.
func TestSurfacesFindsTheAPIsFramework(t *testing.T) {
	t.Parallel()
	goList := "github.com/riverqueue/river\ngithub.com/gofiber/fiber/v2\ngithub.com/cairnhq/cairn/api/v1\n"
	versionM := "\tdep\tgithub.com/danielgtaylor/huma/v2\tv2.39.1\th1:abc=\n\tdep\tgithub.com/lib/pq\tv1.10.9\th1:def=\n"
	if got := surfaces(goList); len(got) != 2 {
		t.Fatalf("go list: %v", got)
	}
	if got := surfaces(versionM); len(got) != 1 {
		t.Fatalf("go version -m: %v", got)
	}
	if got := surfaces("github.com/cairnhq/cairn/api/v1/views\ngithub.com/cairnhq/cairn/api/tfeclient\n"); len(got) != 1 {
		t.Fatalf("a surface's subpackage is one, a package beside it is not: %v", got)
	}
}
