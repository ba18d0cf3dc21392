package modulesv1_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/platform/discovery"
	reg "github.com/cairnhq/cairn/api/registry"
)

// moduleArchive is a module version's upload: one .tf file naming it.
func moduleArchive(t *testing.T, version string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	body := "output \"version\" {\n  value = \"" + version + "\"\n}\n"
	if err := tw.WriteHeader(&tar.Header{Name: "main.tf", Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	_, _ = tw.Write([]byte(body))
	_ = tw.Close()
	_ = gz.Close()
	return buf.Bytes()
}

// registry is a test server with one organization's module and its
// versions, published through the registry service, and a user API token
// of that organization.
type registry struct {
	env       *apitest.Env
	svc       *reg.Service
	owner     *apitest.User
	principal access.Principal
	token     string
	namespace string
	moduleID  string
	versions  map[string]reg.Version
}

func setup(t *testing.T, opts ...apitest.Option) *registry {
	t.Helper()
	env := apitest.New(t, opts...)
	owner := env.WithOrganization("modules")
	ctx := context.Background()
	p, err := env.Server.Services().Identity.AuthenticateSession(ctx, owner.Token)
	if err != nil {
		t.Fatal(err)
	}
	r := &registry{env: env, svc: env.Server.Services().Registry, owner: owner, principal: p, versions: map[string]reg.Version{}}
	var tok struct{ Token string }
	owner.Mutate(http.MethodPost, "/v1/user-tokens", map[string]string{"description": "cli"}).MustStatus(t, http.StatusCreated).Data(t, &tok)
	r.token = tok.Token
	m, err := r.svc.CreateModule(ctx, p, reg.CreateModuleInput{Name: "network", Provider: "aws"})
	if err != nil {
		t.Fatal(err)
	}
	r.moduleID, r.namespace = m.ID, m.Namespace
	return r
}

func (r *registry) publish(t *testing.T, version string) {
	t.Helper()
	ctx := context.Background()
	v, err := r.svc.CreateVersion(ctx, r.principal, r.moduleID, version, reg.VersionOrigin{})
	if err != nil {
		t.Fatal(err)
	}
	if v, err = r.svc.PublishArchive(ctx, v.ID, bytes.NewReader(moduleArchive(t, version))); err != nil || v.Status != reg.VersionOK {
		t.Fatalf("%s published as %+v: %v", version, v, err)
	}
	r.versions[version] = v
}

// get calls modules.v1 with a bearer token ("" sends none).
func (r *registry) get(method, path, token string) *apitest.Response {
	r.env.T.Helper()
	req := apitest.Request{Method: method, Path: path, Header: map[string]string{}}
	if token != "" {
		req.Header["Authorization"] = "Bearer " + token
	}
	return r.env.Anonymous().Do(req)
}

func (r *registry) location(t *testing.T, version string) string {
	t.Helper()
	resp := r.get(http.MethodGet, "/api/registry/v1/modules/"+r.namespace+"/network/aws/"+version+"/download", r.token)
	loc := resp.Header.Get("X-Terraform-Get")
	if resp.Status != http.StatusNoContent || len(resp.Body) != 0 || !strings.HasPrefix(loc, "/api/registry/v1/_dl/") || !strings.HasSuffix(loc, ".tar.gz") {
		t.Fatalf("download %s: %d %q %s", version, resp.Status, loc, resp.Body)
	}
	return loc
}

// TestModulesV1ServesResolvableVersions lists exactly the resolvable
// versions with HCP's deprecation objects, answers download with a
// relative signed archive path that serves HEAD and GET (any query) with
// the published digest, and refuses revoked versions, anonymous callers
// (401 with a challenge) and other organizations (as a missing module).
func TestModulesV1ServesResolvableVersions(t *testing.T) {
	t.Parallel()
	r := setup(t)
	for _, v := range []string{"1.0.0", "1.1.0", "2.0.0-rc.1+build.5"} {
		r.publish(t, v)
	}
	ctx := context.Background()
	if _, err := r.svc.Deprecate(ctx, r.principal, r.versions["1.0.0"].ID, "use 2.x", "https://example.com/why"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.Deprecate(ctx, r.principal, r.versions["1.1.0"].ID, "broken", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.Revoke(ctx, r.principal, r.versions["1.1.0"].ID, "broken"); err != nil {
		t.Fatal(err)
	}

	var disco map[string]any
	r.get(http.MethodGet, "/.well-known/terraform.json", "").MustStatus(t, http.StatusOK).JSON(t, &disco)
	if disco["modules.v1"] != "/api/registry/v1/modules/" {
		t.Fatalf("discovery %v", disco)
	}
	// A sandbox's CLI configuration names these services instead of asking
	// for them: both must be the same list (login.v1 aside, which no
	// sandboxed command uses).
	forced := discovery.Services(true)
	for id, path := range forced {
		if disco[id] != path {
			t.Errorf("sandboxes are told %s is %q, discovery says %v", id, path, disco[id])
		}
	}
	for id := range disco {
		if _, ok := forced[id]; !ok && id != "login.v1" {
			t.Errorf("discovery announces %s, which sandboxes are not told", id)
		}
	}

	versions := "/api/registry/v1/modules/" + r.namespace + "/network/aws/versions"
	var doc struct {
		Modules []struct {
			Source   string `json:"source"`
			Versions []struct {
				Version     string          `json:"version"`
				Deprecation json.RawMessage `json:"deprecation"`
			} `json:"versions"`
		} `json:"modules"`
	}
	r.get(http.MethodGet, versions, r.token).MustStatus(t, http.StatusOK).JSON(t, &doc)
	if len(doc.Modules) != 1 || doc.Modules[0].Source != r.namespace+"/network/aws" {
		t.Fatalf("versions %+v", doc)
	}
	listed := map[string]string{}
	for _, v := range doc.Modules[0].Versions {
		listed[v.Version] = string(v.Deprecation)
	}
	want := map[string]string{"1.0.0": `{"reason":"use 2.x","link":"https://example.com/why"}`, "2.0.0-rc.1+build.5": "null"}
	if len(listed) != len(want) || listed["1.0.0"] != want["1.0.0"] || listed["2.0.0-rc.1+build.5"] != want["2.0.0-rc.1+build.5"] {
		t.Fatalf("listed %v, want %v", listed, want)
	}

	view := r.versions["2.0.0-rc.1+build.5"]
	if view.ArchiveSHA256 == nil || view.ArchiveBytes == nil {
		t.Fatalf("published version %+v", view)
	}
	loc := r.location(t, "2.0.0-rc.1+build.5")
	head := r.get(http.MethodHead, loc, "").MustStatus(t, http.StatusOK)
	got := r.get(http.MethodGet, loc+"?archive=tar.gz&terraform-get=1", "").MustStatus(t, http.StatusOK)
	sum := sha256.Sum256(got.Body)
	if hex.EncodeToString(sum[:]) != *view.ArchiveSHA256 || head.Header.Get("Content-Length") != strconv.FormatInt(*view.ArchiveBytes, 10) ||
		len(head.Body) != 0 || got.Header.Get("Accept-Ranges") != "none" || got.Header.Get("Content-Type") != "application/gzip" {
		t.Fatalf("archive: HEAD %v, GET %d bytes %v, version %+v", head.Header, len(got.Body), got.Header, view)
	}
	if again := r.get(http.MethodGet, loc, ""); again.Status != http.StatusOK || !bytes.Equal(again.Body, got.Body) {
		t.Fatalf("a second GET of the grant: %d", again.Status)
	}
	tampered := []byte(loc)
	tampered[len("/api/registry/v1/_dl/")+2] ^= 1
	r.get(http.MethodGet, string(tampered), "").MustStatus(t, http.StatusNotFound)
	r.get(http.MethodGet, strings.TrimSuffix(loc, ".tar.gz"), "").MustStatus(t, http.StatusNotFound)

	// The revoked version is neither listed nor downloadable; the
	// deprecated one is.
	r.get(http.MethodGet, "/api/registry/v1/modules/"+r.namespace+"/network/aws/1.1.0/download", r.token).MustStatus(t, http.StatusNotFound)
	r.location(t, "1.0.0")

	// No token: 401 with a bearer challenge; a token that is not one: 401.
	anon := r.get(http.MethodGet, versions, "").MustStatus(t, http.StatusUnauthorized)
	if !strings.HasPrefix(anon.Header.Get("WWW-Authenticate"), "Bearer") || !strings.HasPrefix(string(anon.Body), `{"errors":[`) {
		t.Fatalf("anonymous: %v %s", anon.Header, anon.Body)
	}
	r.get(http.MethodGet, versions, "ut_not-a-token").MustStatus(t, http.StatusUnauthorized)

	// Another organization's token: exactly what a missing module gets.
	other := r.env.WithOrganization("other")
	var tok struct{ Token string }
	other.Mutate(http.MethodPost, "/v1/user-tokens", map[string]string{"description": "cli"}).MustStatus(t, http.StatusCreated).Data(t, &tok)
	missing := r.get(http.MethodGet, "/api/registry/v1/modules/"+r.namespace+"/nothing/aws/versions", r.token).MustStatus(t, http.StatusNotFound)
	for _, path := range []string{versions, "/api/registry/v1/modules/" + r.namespace + "/network/aws/1.0.0/download"} {
		foreign := r.get(http.MethodGet, path, tok.Token)
		if foreign.Status != http.StatusNotFound || !bytes.Equal(foreign.Body, missing.Body) || foreign.Header.Get("X-Terraform-Get") != "" {
			t.Fatalf("%s with another organization's token: %d %s (missing: %s)", path, foreign.Status, foreign.Body, missing.Body)
		}
	}
	r.get(http.MethodGet, "/api/registry/v1/elsewhere", r.token).MustStatus(t, http.StatusNotFound)
}

// TestModulesV1ArchiveGrantExpires: a signed archive URL works until its
// lifetime (CAIRN_REGISTRY_DOWNLOAD_TTL) has passed, and not after.
func TestModulesV1ArchiveGrantExpires(t *testing.T) {
	t.Parallel()
	const ttl = 3 * time.Second
	r := setup(t, func(s *apitest.Settings) { s.Config.RegistryDownloadTTL = ttl })
	r.publish(t, "1.0.0")
	loc := r.location(t, "1.0.0")
	// The grant's expiry, rounded up to the second, is at most a second
	// past this; a grant is refused once its expiry second has passed.
	signedBy := time.Now()
	r.get(http.MethodHead, loc, "").MustStatus(t, http.StatusOK)
	time.Sleep(time.Until(signedBy.Add(ttl + 2200*time.Millisecond)))
	r.get(http.MethodHead, loc, "").MustStatus(t, http.StatusNotFound)
	r.get(http.MethodGet, loc, "").MustStatus(t, http.StatusNotFound)
}

// TestModulesV1FailsClosedWithoutTheRegistry: a server without its
// database announces no modules.v1 and answers the protocol with 503.
func TestModulesV1FailsClosedWithoutTheRegistry(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, nil, "")
	var disco map[string]any
	env.Anonymous().Get("/.well-known/terraform.json").MustStatus(t, http.StatusOK).JSON(t, &disco)
	if _, ok := disco["modules.v1"]; ok {
		t.Fatalf("discovery without a registry: %v", disco)
	}
	env.Anonymous().Do(apitest.Request{Method: http.MethodGet, Path: "/api/registry/v1/modules/acme/network/aws/versions",
		Header: map[string]string{"Authorization": "Bearer ut_x"}}).MustStatus(t, http.StatusServiceUnavailable)
	env.Anonymous().Get("/api/registry/v1/_dl/a.b.c.d.1.e.tar.gz").MustStatus(t, http.StatusServiceUnavailable)
}
