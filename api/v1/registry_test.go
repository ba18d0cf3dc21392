package v1_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/authserver"
	"github.com/cairnhq/cairn/api/registry/registrytest"
)

type moduleView struct {
	ID            string  `json:"id"`
	Namespace     string  `json:"namespace"`
	Name          string  `json:"name"`
	Status        string  `json:"status"`
	VersionCount  int     `json:"version_count"`
	LatestVersion *string `json:"latest_version"`
	SourceAddress string  `json:"source_address"`
}

type moduleVersionView struct {
	ID            string  `json:"id"`
	Version       string  `json:"version"`
	Status        string  `json:"status"`
	ArchiveSHA256 *string `json:"archive_sha256"`
	Error         *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Deprecation *struct {
		Reason string  `json:"reason"`
		Link   *string `json:"link"`
	} `json:"deprecation"`
	Revocation *struct {
		Reason string `json:"reason"`
	} `json:"revocation"`
}

func uploadVersion(u *apitest.User, moduleID, version string, archive []byte) *apitest.Response {
	return gzipUpload(u, "/v1/registry/modules/"+moduleID+"/versions?version="+url.QueryEscape(version), archive)
}

// storedRegistryObjects counts the module archives in an API's blob
// directory.
func storedRegistryObjects(env *apitest.Env) int {
	n := 0
	_ = filepath.WalkDir(filepath.Join(env.Config.DataDir, "blobs", "registry"), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && !strings.HasSuffix(d.Name(), ".attrs") {
			n++
		}
		return nil
	})
	return n
}

// TestRegistryOverV1 publishes, reads, deprecates, revokes and deletes a
// module over /v1: members read, readers cannot write, another
// organization finds nothing, a published version is immutable and an
// archive breaking the rules ends errored with its code.
func TestRegistryOverV1(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	owner := env.WithOrganization("Registry")
	member, reader := env.SignUp("Member"), env.SignUp("Reader")
	env.Join(owner, member, "member")
	env.Join(owner, reader, "reader")
	stranger := env.WithOrganization("Stranger")

	var m moduleView
	owner.Mutate(http.MethodPost, "/v1/registry/modules", map[string]string{"name": "network", "provider": "aws"}).
		MustStatus(t, http.StatusCreated).Data(t, &m)
	host := strings.TrimPrefix(strings.TrimPrefix(env.Config.PublicURL, "http://"), "https://")
	if m.Status != "pending" || m.SourceAddress != host+"/"+m.Namespace+"/network/aws" || !strings.HasPrefix(m.Namespace, "org-") {
		t.Fatalf("created module %+v", m)
	}
	if r := owner.Mutate(http.MethodPost, "/v1/registry/modules", map[string]string{"name": "network", "provider": "aws"}); r.Status != http.StatusConflict || r.Code() != "REGISTRY_MODULE_EXISTS" {
		t.Errorf("second module at the address: %d %s", r.Status, r.Body)
	}
	if r := owner.Mutate(http.MethodPost, "/v1/registry/modules", map[string]any{"name": "other", "provider": "aws", "source": map[string]any{"repository_id": 1}}); r.Status != http.StatusUnprocessableEntity || r.Code() != "REGISTRY_MODULE_SOURCE_UNSUPPORTED" {
		t.Errorf("module with a source: %d %s", r.Status, r.Body)
	}
	if r := owner.Mutate(http.MethodPost, "/v1/registry/modules", map[string]string{"name": "-bad", "provider": "aws"}); r.Status != http.StatusBadRequest {
		t.Errorf("module with a bad name: %d %s", r.Status, r.Body)
	}
	for _, u := range []*apitest.User{member, reader} {
		u.Mutate(http.MethodPost, "/v1/registry/modules", map[string]string{"name": "mine", "provider": "aws"}).MustStatus(t, http.StatusForbidden)
	}

	archive := registrytest.Archive(t, registrytest.ModuleFiles("one"))
	var v moduleVersionView
	uploadVersion(owner, m.ID, "1.2.3-alpha+feature", archive).MustStatus(t, http.StatusCreated).Data(t, &v)
	sum := sha256.Sum256(archive)
	if v.Status != "ok" || v.Version != "1.2.3-alpha+feature" || v.ArchiveSHA256 == nil || *v.ArchiveSHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("uploaded version %+v", v)
	}
	if r := uploadVersion(owner, m.ID, "1.2.3-alpha+feature", registrytest.Archive(t, registrytest.ModuleFiles("two"))); r.Status != http.StatusConflict || r.Code() != "REGISTRY_MODULE_VERSION_EXISTS" {
		t.Errorf("published version uploaded again: %d %s", r.Status, r.Body)
	}
	if r := uploadVersion(owner, m.ID, "v2.0.0", archive); r.Status != http.StatusBadRequest {
		t.Errorf("version with a v: %d %s", r.Status, r.Body)
	}
	uploadVersion(reader, m.ID, "3.0.0", archive).MustStatus(t, http.StatusForbidden)
	if n := storedRegistryObjects(env); n != 1 {
		t.Errorf("%d archives stored after refused uploads, want 1", n)
	}
	for version, code := range map[string]string{
		"0.1.0": "archive_path_traversal",
		"0.2.0": "archive_link",
		"0.3.0": "module_no_configuration",
	} {
		body := map[string][]byte{
			"0.1.0": registrytest.ArchiveOf(t, registrytest.Entry{Name: "main.tf", Body: "x"}, registrytest.Entry{Name: "a/../../up.tf", Body: "x"}),
			"0.2.0": registrytest.ArchiveOf(t, registrytest.Entry{Name: "main.tf", Body: "x"}, registrytest.Entry{Name: "l.tf", Typeflag: '1', Linkname: "main.tf"}),
			"0.3.0": registrytest.Archive(t, map[string]string{"README.md": "no code"}),
		}[version]
		var bad moduleVersionView
		uploadVersion(owner, m.ID, version, body).MustStatus(t, http.StatusCreated).Data(t, &bad)
		if bad.Status != "errored" || bad.Error == nil || bad.Error.Code != code || bad.Error.Message == "" {
			t.Errorf("%s: %+v, want errored %s", version, bad, code)
		}
	}
	if n := storedRegistryObjects(env); n != 1 {
		t.Errorf("%d archives stored after errored versions, want 1", n)
	}

	// Members read everything; another organization finds nothing.
	var listed []moduleView
	member.Get("/v1/registry/modules?q=NET").MustStatus(t, http.StatusOK).Data(t, &listed)
	if len(listed) != 1 || listed[0].VersionCount != 4 || listed[0].LatestVersion == nil || *listed[0].LatestVersion != "1.2.3-alpha+feature" {
		t.Errorf("member's list: %+v", listed)
	}
	var facts struct {
		README     string `json:"readme"`
		Inputs     []struct{ Name string }
		Submodules []struct{ Path string }
	}
	member.Get("/v1/registry/module-versions/"+v.ID+"/facts").MustStatus(t, http.StatusOK).Data(t, &facts)
	if !strings.HasPrefix(facts.README, "# Network") || len(facts.Inputs) != 2 || len(facts.Submodules) != 1 || facts.Submodules[0].Path != "modules/sub" {
		t.Errorf("facts: %+v", facts)
	}
	for _, path := range []string{"/v1/registry/modules/" + m.ID, "/v1/registry/modules/" + m.ID + "/versions",
		"/v1/registry/module-versions/" + v.ID, "/v1/registry/module-versions/" + v.ID + "/facts"} {
		member.Get(path).MustStatus(t, http.StatusOK)
		if r := stranger.Get(path); r.Status != http.StatusNotFound || r.Code() != "not_found" && r.Code() != "NOT_FOUND" {
			t.Errorf("stranger GET %s: %d %s", path, r.Status, r.Body)
		}
	}
	var none []moduleView
	stranger.Get("/v1/registry/modules").MustStatus(t, http.StatusOK).Data(t, &none)
	if len(none) != 0 {
		t.Errorf("stranger lists %d modules", len(none))
	}
	stranger.Mutate(http.MethodPost, "/v1/registry/module-versions/"+v.ID+"/actions/deprecate", nil).MustStatus(t, http.StatusNotFound)
	stranger.Mutate(http.MethodDelete, "/v1/registry/modules/"+m.ID, nil).MustStatus(t, http.StatusNotFound)

	// HCP's flag rules.
	actions := "/v1/registry/module-versions/" + v.ID + "/actions/"
	if r := owner.Mutate(http.MethodPost, actions+"revoke", map[string]string{"reason": "broken"}); r.Status != http.StatusConflict || r.Code() != "REGISTRY_MODULE_VERSION_NOT_DEPRECATED" {
		t.Errorf("revoke before deprecation: %d %s", r.Status, r.Body)
	}
	reader.Mutate(http.MethodPost, actions+"deprecate", nil).MustStatus(t, http.StatusForbidden)
	var d moduleVersionView
	owner.Mutate(http.MethodPost, actions+"deprecate", nil).MustStatus(t, http.StatusOK).Data(t, &d)
	if d.Deprecation == nil || d.Deprecation.Link != nil {
		t.Errorf("deprecated without a body: %+v", d.Deprecation)
	}
	owner.Mutate(http.MethodPost, actions+"deprecate", map[string]string{"reason": "use 2.x", "link": "https://example.com/2"}).
		MustStatus(t, http.StatusOK).Data(t, &d)
	if d.Deprecation == nil || d.Deprecation.Reason != "use 2.x" || d.Deprecation.Link == nil || *d.Deprecation.Link != "https://example.com/2" {
		t.Errorf("deprecated with a reason: %+v", d.Deprecation)
	}
	owner.Mutate(http.MethodPost, actions+"revoke", map[string]string{"reason": "broken"}).MustStatus(t, http.StatusOK).Data(t, &d)
	if d.Revocation == nil || d.Revocation.Reason != "broken" {
		t.Errorf("revoked: %+v", d)
	}
	if r := owner.Mutate(http.MethodPost, actions+"restore", nil); r.Status != http.StatusConflict || r.Code() != "REGISTRY_MODULE_VERSION_REVOKED" {
		t.Errorf("restore while revoked: %d %s", r.Status, r.Body)
	}
	owner.Mutate(http.MethodPost, actions+"unrevoke", nil).MustStatus(t, http.StatusOK).Data(t, &d)
	owner.Mutate(http.MethodPost, actions+"restore", nil).MustStatus(t, http.StatusOK).Data(t, &d)
	if d.Deprecation != nil || d.Revocation != nil {
		t.Errorf("restored: %+v", d)
	}

	owner.Mutate(http.MethodDelete, "/v1/registry/module-versions/"+v.ID, nil).MustStatus(t, http.StatusNoContent)
	owner.Get("/v1/registry/module-versions/"+v.ID).MustStatus(t, http.StatusNotFound)
	if n := storedRegistryObjects(env); n != 0 {
		t.Errorf("%d archives after deleting the only published version", n)
	}
	owner.Mutate(http.MethodDelete, "/v1/registry/modules/"+m.ID, nil).MustStatus(t, http.StatusNoContent)
	owner.Get("/v1/registry/modules/"+m.ID).MustStatus(t, http.StatusNotFound)
}

// newRegistryModule is an API with an organization whose owner created
// the module network/aws.
func newRegistryModule(t *testing.T) (*apitest.Env, *apitest.User, moduleView) {
	env := apitest.New(t)
	owner := env.WithOrganization("Registry")
	var m moduleView
	owner.Mutate(http.MethodPost, "/v1/registry/modules", map[string]string{"name": "network", "provider": "aws"}).
		MustStatus(t, http.StatusCreated).Data(t, &m)
	return env, owner, m
}

// TestRegistryUploadOverLimitIsRefusedBeforeStoring declares one byte
// more than 100,000,000 and sends almost nothing: the answer is 413 at
// once and no version or object exists.
func TestRegistryUploadOverLimitIsRefusedBeforeStoring(t *testing.T) {
	t.Parallel()
	env, owner, m := newRegistryModule(t)
	u, err := url.Parse(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/registry/modules/%s/versions?version=1.0.0 HTTP/1.1\r\nHost: %s\r\nCookie: %s=%s\r\n"+
		"Idempotency-Key: %s\r\nContent-Type: application/gzip\r\nContent-Length: 100000001\r\n\r\n\x1f\x8b",
		m.ID, u.Host, authserver.SessionCookie, owner.Token, apitest.NewKey())
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", resp.StatusCode)
	}
	var versions []moduleVersionView
	owner.Get("/v1/registry/modules/"+m.ID+"/versions").MustStatus(t, http.StatusOK).Data(t, &versions)
	if len(versions) != 0 || storedRegistryObjects(env) != 0 {
		t.Errorf("%d versions and %d objects after a refused upload", len(versions), storedRegistryObjects(env))
	}
}

// TestRegistryConcurrentUploadsOfOneVersionOneWins uploads the same
// version string twice at once: one is created, the other is 409, and
// only the winner's archive stays.
func TestRegistryConcurrentUploadsOfOneVersionOneWins(t *testing.T) {
	t.Parallel()
	env, owner, m := newRegistryModule(t)
	statuses := make([]int, 2)
	var wg sync.WaitGroup
	for i := range statuses {
		wg.Go(func() {
			statuses[i] = uploadVersion(owner, m.ID, "1.0.0", registrytest.Archive(t, registrytest.ModuleFiles(fmt.Sprint(i)))).Status
		})
	}
	wg.Wait()
	if !(statuses[0] == http.StatusCreated && statuses[1] == http.StatusConflict) && !(statuses[1] == http.StatusCreated && statuses[0] == http.StatusConflict) {
		t.Errorf("statuses %v, want one 201 and one 409", statuses)
	}
	if n := storedRegistryObjects(env); n != 1 {
		t.Errorf("%d archives stored, want the winner's", n)
	}
}
