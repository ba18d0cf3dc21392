package tfe_test

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/e2e/devstack"
)

func registryModuleDoc(attrs map[string]any) map[string]any {
	return map[string]any{"data": map[string]any{"type": "registry-modules", "attributes": attrs}}
}

func moduleVersionDoc(version string) map[string]any {
	return map[string]any{"data": map[string]any{"type": "registry-module-versions", "attributes": map[string]any{"version": version}}}
}

func versionChangeDoc(attrs map[string]any) map[string]any {
	return map[string]any{"data": map[string]any{"type": "module-versions", "attributes": attrs}}
}

// putUploadResponse PUTs body to a capability URL without a bearer token
// and reads the whole answer.
func putUploadResponse(t *testing.T, rawURL string, body []byte) *apitest.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, rawURL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	read, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &apitest.Response{Status: resp.StatusCode, Header: resp.Header, Body: read}
}

// registrySetup starts a server with an organization whose owner holds a
// token; base is its registry-modules path, private the address of its
// private network/aws module.
func registrySetup(t *testing.T, name string) (env *apitest.Env, u *cloudUser, base, private string) {
	t.Helper()
	env = apitest.New(t)
	u = newCloudUser(t, env, name)
	base = "/api/v2/organizations/" + u.org + "/registry-modules"
	return env, u, base, base + "/private/" + u.org + "/network/aws"
}

// moduleArchive is a publishable module: one root .tf file.
func moduleArchive(body string) []byte {
	return devstack.TarGz(map[string]string{"main.tf": body})
}

// TestRegistryModulesThroughTheRemoteBackendAPI walks go-tfe's registry
// calls without a VCS connection: private and public modules are created
// (HCP's invalid inputs refused), read by address and by ID and listed
// with every filter; versions are created on both paths (build metadata
// kept), published through their signed upload link without a bearer (the
// same bytes again answer as the first time, other bytes are refused),
// read, deprecated, revoked, un-revoked and restored by HCP's rules, and
// deleted by version, provider and name on the current and the deprecated
// paths.
func TestRegistryModulesThroughTheRemoteBackendAPI(t *testing.T) {
	t.Parallel()
	env, u, base, private := registrySetup(t, "Registry")

	created := u.call(t, http.MethodPost, base, registryModuleDoc(map[string]any{"name": "network", "provider": "aws"})).
		MustStatus(t, http.StatusCreated)
	mod := decode(t, created)
	a := mod.Data.Attributes
	if mod.Data.Type != "registry-modules" || a["name"] != "network" || a["provider"] != "aws" || a["registry-name"] != "private" ||
		a["namespace"] != u.org || a["status"] != "pending" || a["vcs-repo"] != nil || a["no-code"] != false {
		t.Fatalf("created: %s", created.Body)
	}
	if perms, _ := a["permissions"].(map[string]any); perms["can-delete"] != true || perms["can-resync"] != true || perms["can-retry"] != true {
		t.Fatalf("permissions: %v", a["permissions"])
	}
	if statuses, ok := a["version-statuses"].([]any); !ok || len(statuses) != 0 {
		t.Fatalf("version-statuses: %v", a["version-statuses"])
	}
	if org, _ := mod.Data.Relationships["organization"].Data.(map[string]any); org["id"] != u.org {
		t.Fatalf("organization: %+v", mod.Data.Relationships)
	}
	// Read by address and by ID answer exactly as create did (go-tfe's
	// list test compares whole modules).
	for _, path := range []string{private, "/api/v2/registry-modules/" + mod.Data.ID} {
		if r := u.call(t, http.MethodGet, path, nil).MustStatus(t, http.StatusOK); string(r.Body) != string(created.Body) {
			t.Fatalf("read %s differs from create:\n%s\n%s", path, r.Body, created.Body)
		}
	}

	for name, attrs := range map[string]map[string]any{
		"invalid name":                  {"name": "invalid name", "provider": "aws"},
		"invalid provider":              {"name": "network", "provider": "invalid provider"},
		"unknown registry":              {"name": "network", "provider": "aws", "registry-name": "PRIVATE"},
		"namespace on a private module": {"name": "other", "provider": "aws", "registry-name": "private", "namespace": "ns"},
		"public without a namespace":    {"name": "other", "provider": "aws", "registry-name": "public"},
		"no-code":                       {"name": "other", "provider": "aws", "no-code": true},
		"without a name":                {"provider": "aws"},
	} {
		if r := u.call(t, http.MethodPost, base, registryModuleDoc(attrs)); r.Status != http.StatusUnprocessableEntity {
			t.Fatalf("%s = %d %s", name, r.Status, r.Body)
		}
	}
	if r := u.call(t, http.MethodPost, base, registryModuleDoc(map[string]any{"name": "network", "provider": "aws"})); r.Status != http.StatusConflict {
		t.Fatalf("duplicate = %d %s", r.Status, r.Body)
	}
	public := decode(t, u.call(t, http.MethodPost, base, registryModuleDoc(map[string]any{
		"name": "vpc", "provider": "aws", "registry-name": "public", "namespace": "terraform-aws-modules"})).MustStatus(t, http.StatusCreated))
	if public.Data.Attributes["namespace"] != "terraform-aws-modules" || public.Data.Attributes["registry-name"] != "public" {
		t.Fatalf("public: %v", public.Data.Attributes)
	}
	if r := decode(t, u.call(t, http.MethodGet, base+"/public/terraform-aws-modules/vpc/aws", nil).MustStatus(t, http.StatusOK)); r.Data.ID != public.Data.ID {
		t.Fatalf("public read: %+v", r.Data)
	}

	var list listDocument
	for query, want := range map[string][]string{
		"":                                     {mod.Data.ID, public.Data.ID},
		"?q=netw":                              {mod.Data.ID},
		"?filter[provider]=aws":                {mod.Data.ID, public.Data.ID},
		"?filter[provider]=google":             {},
		"?filter[registry_name]=public":        {public.Data.ID},
		"?filter[organization_name]=" + u.org:  {mod.Data.ID, public.Data.ID},
		"?filter[organization_name]=elsewhere": {},
		"?page[number]=999&page[size]=100":     {},
	} {
		u.call(t, http.MethodGet, base+query, nil).MustStatus(t, http.StatusOK).JSON(t, &list)
		got := []string{}
		for _, d := range list.Data {
			got = append(got, d.ID)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("list%s = %v, want %v", query, got, want)
		}
	}
	u.call(t, http.MethodGet, base+"?page[number]=2&page[size]=1", nil).MustStatus(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 || list.Meta.Pagination.CurrentPage != 2 || list.Meta.Pagination.TotalCount != 2 {
		t.Fatalf("page 2: %+v", list)
	}

	// Versions: go-tfe's old path and the documented one; build metadata
	// survives the path's '+'.
	preCreated := u.call(t, http.MethodPost, "/api/v2/registry-modules/"+u.org+"/network/aws/versions",
		moduleVersionDoc("1.2.3-alpha+feature")).MustStatus(t, http.StatusCreated)
	pre := decode(t, preCreated)
	if pre.Data.Type != "registry-module-versions" || pre.Data.Attributes["version"] != "1.2.3-alpha+feature" ||
		pre.Data.Attributes["status"] != "pending" || pre.Data.Attributes["source"] != "tfe-api" {
		t.Fatalf("version: %+v", pre.Data)
	}
	if rel, _ := pre.Data.Relationships["registry-module"].Data.(map[string]any); rel["id"] != mod.Data.ID {
		t.Fatalf("registry-module: %+v", pre.Data.Relationships)
	}
	var withLinks struct {
		Data struct {
			Links map[string]string `json:"links"`
		} `json:"data"`
	}
	preCreated.JSON(t, &withLinks)
	preUpload := withLinks.Data.Links["upload"]
	u.call(t, http.MethodPost, private+"/versions", moduleVersionDoc("1.0.0")).MustStatus(t, http.StatusCreated).JSON(t, &withLinks)
	upload := withLinks.Data.Links["upload"]
	if !strings.Contains(upload, "/object/") {
		t.Fatalf("upload link %q", upload)
	}
	if r := u.call(t, http.MethodPost, private+"/versions", moduleVersionDoc("1.0.0")); r.Status != http.StatusConflict {
		t.Fatalf("duplicate version = %d %s", r.Status, r.Body)
	}
	if r := u.call(t, http.MethodPost, private+"/versions", moduleVersionDoc("invalid version")); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("invalid version = %d %s", r.Status, r.Body)
	}

	// The link works without a bearer; a changed signature does not.
	archive := moduleArchive(`variable "cidr" {}`)
	tampered, _ := url.Parse(upload)
	q := tampered.Query()
	q.Set("signature", strings.Repeat("0", len(q.Get("signature"))))
	tampered.RawQuery = q.Encode()
	if resp := putUploadResponse(t, tampered.String(), archive); resp.Status != http.StatusNotFound {
		t.Fatalf("tampered upload = %d %s", resp.Status, resp.Body)
	}
	if resp := putUploadResponse(t, upload, archive); resp.Status != http.StatusOK {
		t.Fatalf("upload = %d %s\n%s", resp.Status, resp.Body, env.Logs)
	}
	if resp := putUploadResponse(t, upload, archive); resp.Status != http.StatusOK {
		t.Fatalf("the same bytes again = %d %s", resp.Status, resp.Body)
	}
	if resp := putUploadResponse(t, upload, moduleArchive(`variable "other" {}`)); resp.Status != http.StatusConflict {
		t.Fatalf("other bytes = %d %s", resp.Status, resp.Body)
	}
	published := decode(t, u.call(t, http.MethodGet, private+"/version?module_version=1.0.0", nil).MustStatus(t, http.StatusOK))
	if published.Data.Attributes["status"] != "ok" || published.Data.Attributes["version"] != "1.0.0" {
		t.Fatalf("published: %+v", published.Data)
	}
	if r := u.call(t, http.MethodGet, private+"/version?module_version=9.9.9", nil); r.Status != http.StatusNotFound {
		t.Fatalf("missing version = %d %s", r.Status, r.Body)
	}
	// An archive without configuration errors its version for good, and
	// the uploader is told why, again on a repeat.
	for range 2 {
		resp := putUploadResponse(t, preUpload, devstack.TarGz(map[string]string{"README.md": "# nothing"}))
		if d := decode(t, resp); resp.Status != http.StatusUnprocessableEntity || len(d.Errors) != 1 || d.Errors[0].Code != "module_no_configuration" {
			t.Fatalf("upload without configuration = %d %s", resp.Status, resp.Body)
		}
	}
	read := decode(t, u.call(t, http.MethodGet, private, nil).MustStatus(t, http.StatusOK)).Data.Attributes
	statuses, _ := read["version-statuses"].([]any)
	if read["status"] != "setup_complete" || len(statuses) != 2 {
		t.Fatalf("module after publishing: %v", read)
	}
	if first, _ := statuses[0].(map[string]any); first["version"] != "1.2.3-alpha+feature" || first["status"] != "reg_ingress_failed" || first["error"] == "" {
		t.Fatalf("version-statuses: %v", statuses)
	}

	// HCP's deprecation and revocation rules.
	patch := func(version string, attrs map[string]any) *apitest.Response {
		return u.call(t, http.MethodPatch, private+"/"+version, versionChangeDoc(attrs))
	}
	if r := patch("1.0.0", map[string]any{"revocation": map[string]any{"status": "Revoked", "message": "broken"}}); r.Status < 400 {
		t.Fatalf("revoking a version that is not deprecated = %d %s", r.Status, r.Body)
	}
	dep := decode(t, patch("1.0.0", map[string]any{"deprecation": map[string]any{
		"deprecated-status": "Deprecated", "reason": "use 2.x", "link": "https://example.com/upgrade"}}).MustStatus(t, http.StatusOK))
	if d, _ := dep.Data.Attributes["deprecation"].(map[string]any); d["reason"] != "use 2.x" || d["link"] != "https://example.com/upgrade" {
		t.Fatalf("deprecated: %v", dep.Data.Attributes)
	}
	rev := decode(t, patch("1.0.0", map[string]any{"revocation": map[string]any{"status": "Revoked", "message": "broken"}}).
		MustStatus(t, http.StatusOK))
	if r, _ := rev.Data.Attributes["revocation"].(map[string]any); r["status"] != "Revoked" || r["message"] != "broken" {
		t.Fatalf("revoked: %v", rev.Data.Attributes)
	}
	if r := patch("1.0.0", map[string]any{"deprecation": map[string]any{"deprecated-status": "Undeprecated"}}); r.Status < 400 {
		t.Fatalf("restoring a revoked version = %d %s", r.Status, r.Body)
	}
	unrev := decode(t, patch("1.0.0", map[string]any{"revocation": map[string]any{"status": "Unrevoked"}}).MustStatus(t, http.StatusOK))
	if unrev.Data.Attributes["revocation"] != nil || unrev.Data.Attributes["deprecation"] == nil {
		t.Fatalf("un-revoked: %v", unrev.Data.Attributes)
	}
	restored := decode(t, patch("1.0.0", map[string]any{"deprecation": map[string]any{"deprecated-status": "Undeprecated"}}).
		MustStatus(t, http.StatusOK))
	if restored.Data.Attributes["deprecation"] != nil {
		t.Fatalf("restored: %v", restored.Data.Attributes)
	}
	for name, attrs := range map[string]map[string]any{
		"neither":        {},
		"both":           {"deprecation": map[string]any{"deprecated-status": "Deprecated"}, "revocation": map[string]any{"status": "Revoked"}},
		"unknown status": {"deprecation": map[string]any{"deprecated-status": "Obsolete"}},
	} {
		if r := patch("1.0.0", attrs); r.Status != http.StatusUnprocessableEntity {
			t.Fatalf("%s = %d %s", name, r.Status, r.Body)
		}
	}

	// Deletes: a version on the current and on the deprecated path, then a
	// provider, then a name.
	u.call(t, http.MethodDelete, private+"/1.2.3-alpha+feature", nil).MustStatus(t, http.StatusNoContent)
	u.call(t, http.MethodPost, "/api/v2/registry-modules/actions/delete/"+u.org+"/network/aws/1.0.0", nil).MustStatus(t, http.StatusNoContent)
	if statuses := decode(t, u.call(t, http.MethodGet, private, nil).MustStatus(t, http.StatusOK)).Data.Attributes["version-statuses"].([]any); len(statuses) != 0 {
		t.Fatalf("versions after deletes: %v", statuses)
	}
	u.call(t, http.MethodDelete, private, nil).MustStatus(t, http.StatusNoContent)
	u.call(t, http.MethodGet, private, nil).MustStatus(t, http.StatusNotFound)
	u.call(t, http.MethodDelete, base+"/public/terraform-aws-modules/vpc", nil).MustStatus(t, http.StatusNoContent)
	u.call(t, http.MethodGet, "/api/v2/registry-modules/"+public.Data.ID, nil).MustStatus(t, http.StatusNotFound)
	// The deprecated delete names no registry: it deletes the name in
	// every registry and namespace of the organization.
	u.call(t, http.MethodPost, base, registryModuleDoc(map[string]any{"name": "network", "provider": "aws"})).MustStatus(t, http.StatusCreated)
	u.call(t, http.MethodPost, base, registryModuleDoc(map[string]any{"name": "network", "provider": "google"})).MustStatus(t, http.StatusCreated)
	u.call(t, http.MethodPost, base, registryModuleDoc(map[string]any{
		"name": "network", "provider": "aws", "registry-name": "public", "namespace": "ns"})).MustStatus(t, http.StatusCreated)
	u.call(t, http.MethodPost, "/api/v2/registry-modules/actions/delete/"+u.org+"/network/google", nil).MustStatus(t, http.StatusNoContent)
	u.call(t, http.MethodGet, base+"/private/"+u.org+"/network/google", nil).MustStatus(t, http.StatusNotFound)
	u.call(t, http.MethodGet, private, nil).MustStatus(t, http.StatusOK)
	u.call(t, http.MethodPost, "/api/v2/registry-modules/actions/delete/"+u.org+"/network", nil).MustStatus(t, http.StatusNoContent)
	u.call(t, http.MethodGet, private, nil).MustStatus(t, http.StatusNotFound)
	u.call(t, http.MethodGet, base+"/public/ns/network/aws", nil).MustStatus(t, http.StatusNotFound)
	u.call(t, http.MethodPost, "/api/v2/registry-modules/actions/delete/"+u.org+"/network", nil).MustStatus(t, http.StatusNotFound)
}

// TestRegistryModulesAcrossOrganizationsAndRoles: another organization's
// module answers exactly as a missing one on every path; a reader reads
// modules (without permissions or an upload link) and changes nothing.
func TestRegistryModulesAcrossOrganizationsAndRoles(t *testing.T) {
	t.Parallel()
	env, u, base, private := registrySetup(t, "Publisher")
	mod := decode(t, u.call(t, http.MethodPost, base, registryModuleDoc(map[string]any{"name": "network", "provider": "aws"})).
		MustStatus(t, http.StatusCreated))
	u.call(t, http.MethodPost, private+"/versions", moduleVersionDoc("1.0.0")).MustStatus(t, http.StatusCreated)

	other := newCloudUser(t, env, "Elsewhere")
	missing := base + "/private/" + u.org + "/missing/aws"
	for _, c := range []struct{ method, path, missingPath string }{
		{http.MethodGet, private, missing},
		{http.MethodGet, "/api/v2/registry-modules/" + mod.Data.ID, "/api/v2/registry-modules/mod_missing"},
		{http.MethodGet, private + "/version?module_version=1.0.0", missing + "/version?module_version=1.0.0"},
		{http.MethodGet, base, base},
		{http.MethodPost, private + "/versions", missing + "/versions"},
		{http.MethodDelete, private + "/1.0.0", missing + "/1.0.0"},
		{http.MethodDelete, private, missing},
		{http.MethodPost, "/api/v2/registry-modules/actions/delete/" + u.org + "/network", "/api/v2/registry-modules/actions/delete/" + u.org + "/missing"},
	} {
		r := other.call(t, c.method, c.path, moduleVersionDoc("2.0.0"))
		m := other.call(t, c.method, c.missingPath, moduleVersionDoc("2.0.0"))
		re, me := decode(t, r).Errors, decode(t, m).Errors
		if r.Status != http.StatusNotFound || m.Status != http.StatusNotFound || len(re) != 1 || len(me) != 1 ||
			re[0].Title != me[0].Title || re[0].Detail != me[0].Detail || re[0].Code != me[0].Code {
			t.Fatalf("%s %s from another organization = %d %s, missing = %d %s", c.method, c.path, r.Status, r.Body, m.Status, m.Body)
		}
	}
	// Its own organization has no such module either.
	if r := other.call(t, http.MethodGet, "/api/v2/organizations/"+other.org+"/registry-modules/private/"+u.org+"/network/aws", nil); r.Status != http.StatusNotFound {
		t.Fatalf("the module under another organization's path = %d %s", r.Status, r.Body)
	}

	_, readerToken := joinWithToken(t, env, u, "Reader", "reader")
	read := decode(t, callWith(t, env, readerToken, http.MethodGet, private, nil).MustStatus(t, http.StatusOK))
	if perms, _ := read.Data.Attributes["permissions"].(map[string]any); perms["can-delete"] != false {
		t.Fatalf("reader permissions: %v", read.Data.Attributes["permissions"])
	}
	var version struct {
		Data struct {
			Links map[string]string `json:"links"`
		} `json:"data"`
	}
	callWith(t, env, readerToken, http.MethodGet, private+"/version?module_version=1.0.0", nil).MustStatus(t, http.StatusOK).JSON(t, &version)
	if version.Data.Links["upload"] != "" {
		t.Fatalf("a reader got the upload link: %v", version.Data.Links)
	}
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{http.MethodPost, base, registryModuleDoc(map[string]any{"name": "mine", "provider": "aws"})},
		{http.MethodPost, private + "/versions", moduleVersionDoc("2.0.0")},
		{http.MethodPatch, private + "/1.0.0", versionChangeDoc(map[string]any{"deprecation": map[string]any{"deprecated-status": "Deprecated"}})},
		{http.MethodDelete, private + "/1.0.0", nil},
		{http.MethodDelete, private, nil},
	} {
		if r := callWith(t, env, readerToken, c.method, c.path, c.body); r.Status != http.StatusForbidden {
			t.Fatalf("reader %s %s = %d %s", c.method, c.path, r.Status, r.Body)
		}
	}
}
