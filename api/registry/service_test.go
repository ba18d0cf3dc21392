package registry_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/blob"
	"github.com/cairnhq/cairn/api/platform/dbtest"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/platform/seal"
	"github.com/cairnhq/cairn/api/registry"
	"github.com/cairnhq/cairn/api/registry/registrytest"
)

type env struct {
	svc      *registry.Service
	conn     *sqlx.DB
	blobDir  string
	orgName  string
	owner    access.Principal
	writer   access.Principal
	reader   access.Principal
	member   access.Principal
	stranger access.Principal // a writer of another organization
}

func setup(t *testing.T) env {
	t.Helper()
	conn := dbtest.New(t)
	sealer, err := seal.NewStreamSealer(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	blobs, err := blob.OpenDir(dir, "", sealer)
	if err != nil {
		t.Fatal(err)
	}
	e := env{svc: registry.NewService(conn, blobs, registry.Options{}), conn: conn, blobDir: dir, orgName: "acme"}
	org, other := id.New("org"), id.New("org")
	for _, o := range []struct{ id, slug string }{{org, "acme"}, {other, "globex"}} {
		if _, err := conn.Exec(`INSERT INTO organizations (id, name, slug) VALUES ($1, $2, $2)`, o.id, o.slug); err != nil {
			t.Fatal(err)
		}
	}
	principal := func(orgID string, role access.Role) access.Principal {
		return access.Principal{Kind: access.KindUser, ID: id.New("usr"), OrganizationID: orgID, Role: role,
			Permissions: access.PermissionsOf(role)}
	}
	e.owner, e.writer, e.reader, e.member = principal(org, access.RoleOwner), principal(org, access.RoleWriter),
		principal(org, access.RoleReader), principal(org, access.RoleMember)
	e.stranger = principal(other, access.RoleOwner)
	return e
}

func (e env) module(t *testing.T, name string) registry.Module {
	t.Helper()
	m, err := e.svc.CreateModule(context.Background(), e.writer, registry.CreateModuleInput{Name: name, Provider: "aws"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (e env) publish(t *testing.T, moduleID, version string, archive []byte) registry.Version {
	t.Helper()
	ctx := context.Background()
	v, err := e.svc.CreateVersion(ctx, e.writer, moduleID, version, registry.VersionOrigin{})
	if err != nil {
		t.Fatal(err)
	}
	v, err = e.svc.PublishArchive(ctx, v.ID, bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// storedArchives counts the archive objects in the blob directory.
func (e env) storedArchives(t *testing.T) int {
	t.Helper()
	n := 0
	_ = filepath.WalkDir(filepath.Join(e.blobDir, "registry"), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && !strings.HasSuffix(d.Name(), ".attrs") {
			n++
		}
		return nil
	})
	return n
}

func (e env) auditActions(t *testing.T) []string {
	t.Helper()
	var actions []string
	if err := e.conn.Select(&actions, `SELECT action FROM audit_events WHERE action LIKE 'registry%' ORDER BY created_at, id`); err != nil {
		t.Fatal(err)
	}
	return actions
}

func TestPublishArchiveSealsItAndReadsItsFacts(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	m := e.module(t, "network")
	if m.Namespace != "acme" || m.OrganizationName != "acme" || m.Status != registry.ModulePending || m.RegistryName != registry.RegistryPrivate {
		t.Fatalf("created module %+v", m)
	}
	files := registrytest.ModuleFiles("one")
	files["data.tf"] = "data \"terraform_remote_state\" \"peer\" {\n  backend = \"local\"\n}\n"
	files["versions.tofu"] = "terraform {\n  required_providers {\n    random = {\n      source  = \"hashicorp/random\"\n      version = \"~> 3.0\"\n    }\n  }\n}\n"
	archive := registrytest.Archive(t, files)
	v := e.publish(t, m.ID, "1.2.3-alpha+feature", archive)
	sum := sha256.Sum256(archive)
	if v.Status != registry.VersionOK || v.Version != "1.2.3-alpha+feature" || *v.ArchiveSHA256 != hex.EncodeToString(sum[:]) ||
		*v.ArchiveBytes != int64(len(archive)) || v.PublishedAt == nil || v.Origin != registry.OriginUpload {
		t.Fatalf("published version %+v", v)
	}
	facts, err := e.svc.Facts(ctx, e.member, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := registry.Facts{
		README: files["README.md"],
		Inputs: []registry.Input{
			{Name: "cidr", Type: "string", Description: "The network's range.", Default: []byte(`"10.0.0.0/16"`)},
			{Name: "name", Type: "string", Default: []byte("null"), Required: true},
		},
		Outputs:   []registry.Output{{Name: "id", Sensitive: true}, {Name: "marker", Description: "What version this is."}},
		Resources: []registry.Resource{{Type: "terraform_remote_state", Name: "peer", Mode: "data"}, {Type: "terraform_data", Name: "network", Mode: "managed"}},
		Providers: []registry.Provider{
			{Name: "random", Source: "hashicorp/random", VersionConstraints: []string{"~> 3.0"}},
			{Name: "terraform", VersionConstraints: []string{}},
		},
		Submodules: []registry.Submodule{{Path: "modules/sub",
			Inputs:    []registry.Input{{Name: "size", Type: "number", Default: []byte("3")}},
			Outputs:   []registry.Output{{Name: "size"}},
			Resources: []registry.Resource{{Type: "terraform_data", Name: "sub", Mode: "managed"}}}},
	}
	if diff := cmp.Diff(want, facts); diff != "" {
		t.Errorf("facts (-want +got):\n%s", diff)
	}
	got, err := e.svc.Module(ctx, e.reader, m.ID)
	if err != nil || got.Status != registry.ModuleSetupComplete || got.VersionCount != 1 || got.LatestVersion == nil || *got.LatestVersion != v.Version {
		t.Fatalf("module after publishing: %+v, %v", got, err)
	}
	r, size, err := e.svc.OpenArchive(ctx, v.ID, *v.ArchiveSHA256)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(r)
	r.Close()
	if err != nil || size != int64(len(archive)) || !bytes.Equal(body, archive) {
		t.Fatalf("archive read back: %d bytes of %d, %v", len(body), size, err)
	}
	other := sha256.Sum256([]byte("x"))
	if _, _, err := e.svc.OpenArchive(ctx, v.ID, hex.EncodeToString(other[:])); !errors.Is(err, fault.ErrNotFound) {
		t.Errorf("archive opened under another digest: %v", err)
	}
	if diff := cmp.Diff([]string{"registry_module.created", "registry_module_version.created", "registry_module_version.published"}, e.auditActions(t)); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
}

func TestPublishedVersionIsImmutable(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	m := e.module(t, "network")
	archive := registrytest.Archive(t, registrytest.ModuleFiles("one"))
	v := e.publish(t, m.ID, "1.0.0", archive)
	again, err := e.svc.PublishArchive(ctx, v.ID, bytes.NewReader(archive))
	if err != nil || again.Status != registry.VersionOK || *again.ArchiveSHA256 != *v.ArchiveSHA256 {
		t.Fatalf("repeat of the same bytes: %+v, %v", again, err)
	}
	_, err = e.svc.PublishArchive(ctx, v.ID, bytes.NewReader(registrytest.Archive(t, registrytest.ModuleFiles("two"))))
	if !errors.Is(err, registry.ErrVersionNotPending) || !errors.Is(err, fault.ErrConflict) {
		t.Fatalf("other bytes for a published version: %v", err)
	}
	if _, err := e.svc.CreateVersion(ctx, e.writer, m.ID, "1.0.0", registry.VersionOrigin{}); !errors.Is(err, registry.ErrVersionExists) {
		t.Fatalf("version created twice: %v", err)
	}
	if n := e.storedArchives(t); n != 1 {
		t.Errorf("%d archives stored, want 1", n)
	}
}

func TestArchivesBreakingTheRulesEndErrored(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	m := e.module(t, "network")
	for version, tc := range map[string]struct {
		archive []byte
		code    string
	}{
		"1.0.0": {registrytest.ArchiveOf(t, registrytest.Entry{Name: "main.tf", Body: "x"}, registrytest.Entry{Name: "../escape.tf", Body: "x"}), "archive_path_traversal"},
		"1.0.1": {registrytest.ArchiveOf(t, registrytest.Entry{Name: "main.tf", Body: "x"}, registrytest.Entry{Name: "link.tf", Typeflag: '2', Linkname: "/etc/passwd"}), "archive_link"},
		"1.0.2": {registrytest.Archive(t, map[string]string{"README.md": "nothing", "modules/sub/main.tf": "variable \"a\" {}"}), registry.CodeNoConfiguration},
		"1.0.3": {[]byte("not an archive"), "archive_malformed"},
		"1.0.4": {registrytest.Archive(t, map[string]string{"main.tf": "resource {{{"}), registry.CodeInvalidConfig},
	} {
		v, err := e.svc.CreateVersion(ctx, e.writer, m.ID, version, registry.VersionOrigin{})
		if err != nil {
			t.Fatal(err)
		}
		v, err = e.svc.PublishArchive(ctx, v.ID, bytes.NewReader(tc.archive))
		if err != nil {
			t.Fatalf("%s: %v", version, err)
		}
		if v.Status != registry.VersionErrored || v.ErrorCode == nil || *v.ErrorCode != tc.code || v.ErrorMessage == nil || *v.ErrorMessage == "" {
			t.Errorf("%s: %+v, want errored %s", version, v, tc.code)
		}
		if _, err := e.svc.Facts(ctx, e.reader, v.ID); !errors.Is(err, fault.ErrNotFound) {
			t.Errorf("%s: facts of an errored version: %v", version, err)
		}
	}
	if n := e.storedArchives(t); n != 0 {
		t.Errorf("%d refused archives left in storage", n)
	}
	got, err := e.svc.Module(ctx, e.reader, m.ID)
	if err != nil || got.Status != registry.ModuleSetupFailed || got.LatestVersion != nil {
		t.Errorf("module with only errored versions: %+v, %v", got, err)
	}
	// A module written for OpenTofu only (.tofu files) is a module.
	v := e.publish(t, m.ID, "1.1.0", registrytest.Archive(t, map[string]string{"main.tofu": "output \"x\" {\n  value = 1\n}\n"}))
	if v.Status != registry.VersionOK {
		t.Errorf(".tofu module: %+v", v)
	}
}

func TestAnotherOrganizationsModuleIsNotFound(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	m := e.module(t, "network")
	v := e.publish(t, m.ID, "1.0.0", registrytest.Archive(t, registrytest.ModuleFiles("one")))
	s, p := e.svc, e.stranger
	for name, call := range map[string]func() error{
		"module":   func() error { _, err := s.Module(ctx, p, m.ID); return err },
		"address":  func() error { _, err := s.ModuleByAddress(ctx, p, "private", "acme", "network", "aws"); return err },
		"versions": func() error { _, _, err := s.ListVersions(ctx, p, m.ID, registry.ListVersionsQuery{}); return err },
		"version":  func() error { _, err := s.Version(ctx, p, v.ID); return err },
		"by string": func() error {
			_, err := s.VersionByString(ctx, p, m.ID, "1.0.0")
			return err
		},
		"facts":      func() error { _, err := s.Facts(ctx, p, v.ID); return err },
		"resolvable": func() error { _, err := s.ResolvableVersions(ctx, p, "acme", "network", "aws"); return err },
		"create version": func() error {
			_, err := s.CreateVersion(ctx, p, m.ID, "2.0.0", registry.VersionOrigin{})
			return err
		},
		"deprecate":      func() error { _, err := s.Deprecate(ctx, p, v.ID, "", ""); return err },
		"delete version": func() error { return s.DeleteVersion(ctx, p, v.ID) },
		"delete module":  func() error { return s.DeleteModule(ctx, p, m.ID) },
		"delete by name": func() error { return s.DeleteModulesByName(ctx, p, "private", "acme", "network", nil) },
		"missing":        func() error { _, err := s.Module(ctx, e.owner, id.New("mod")); return err },
	} {
		if err := call(); !errors.Is(err, fault.ErrNotFound) {
			t.Errorf("%s: %v, want not found", name, err)
		}
	}
	mods, _, err := s.ListModules(ctx, p, registry.ListModulesQuery{})
	if err != nil || len(mods) != 0 {
		t.Errorf("another organization lists %d modules, %v", len(mods), err)
	}
	if got, err := s.Version(ctx, e.member, v.ID); err != nil || got.Status != registry.VersionOK {
		t.Errorf("the owning organization lost the version: %v", err)
	}
}

func TestMembersReadAndReadersCannotWrite(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	m := e.module(t, "network")
	v := e.publish(t, m.ID, "1.0.0", registrytest.Archive(t, registrytest.ModuleFiles("one")))
	if mods, _, err := e.svc.ListModules(ctx, e.member, registry.ListModulesQuery{}); err != nil || len(mods) != 1 {
		t.Fatalf("member lists %d modules, %v", len(mods), err)
	}
	if _, err := e.svc.ResolvableVersions(ctx, e.member, "acme", "network", "aws"); err != nil {
		t.Fatalf("member resolves versions: %v", err)
	}
	for _, p := range []access.Principal{e.reader, e.member} {
		for name, call := range map[string]func() error{
			"create module": func() error {
				_, err := e.svc.CreateModule(ctx, p, registry.CreateModuleInput{Name: "other", Provider: "aws"})
				return err
			},
			"create version": func() error {
				_, err := e.svc.CreateVersion(ctx, p, m.ID, "2.0.0", registry.VersionOrigin{})
				return err
			},
			"deprecate":      func() error { _, err := e.svc.Deprecate(ctx, p, v.ID, "", ""); return err },
			"delete version": func() error { return e.svc.DeleteVersion(ctx, p, v.ID) },
			"delete module":  func() error { return e.svc.DeleteModule(ctx, p, m.ID) },
		} {
			if err := call(); !errors.Is(err, fault.ErrForbidden) {
				t.Errorf("%s %s: %v, want forbidden", p.Role, name, err)
			}
		}
	}
	teamMember := e.member
	teamMember.Permissions = teamMember.Permissions.Union(access.OrganizationAccess{ManageModules: true}.Permissions())
	if _, err := e.svc.CreateModule(ctx, teamMember, registry.CreateModuleInput{Name: "other", Provider: "aws"}); err != nil {
		t.Errorf("a member of a manage-modules team cannot create a module: %v", err)
	}
}

func TestDeprecationAndRevocationFollowHCP(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	m := e.module(t, "network")
	old := e.publish(t, m.ID, "1.0.0", registrytest.Archive(t, registrytest.ModuleFiles("one")))
	e.publish(t, m.ID, "1.1.0", registrytest.Archive(t, registrytest.ModuleFiles("two")))
	if _, err := e.svc.Revoke(ctx, e.writer, old.ID, "broken"); !errors.Is(err, registry.ErrNotDeprecated) {
		t.Fatalf("revoked without deprecation: %v", err)
	}
	if _, err := e.svc.Deprecate(ctx, e.writer, old.ID, "old", "http://example.com"); !errors.Is(err, fault.ErrValidation) {
		t.Fatalf("deprecated with an http link: %v", err)
	}
	if _, err := e.svc.Deprecate(ctx, e.writer, old.ID, strings.Repeat("é", 1001), ""); !errors.Is(err, fault.ErrValidation) {
		t.Fatalf("deprecated with a long reason: %v", err)
	}
	d, err := e.svc.Deprecate(ctx, e.writer, old.ID, "use 1.1", "https://example.com/upgrade")
	if err != nil || d.Deprecation == nil || d.Deprecation.Reason != "use 1.1" || d.Deprecation.Link != "https://example.com/upgrade" || d.Deprecation.By != e.writer.ID {
		t.Fatalf("deprecated: %+v, %v", d.Deprecation, err)
	}
	resolvable := func() []string {
		vs, err := e.svc.ResolvableVersions(ctx, e.reader, "acme", "network", "aws")
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, v := range vs {
			out = append(out, v.Version)
		}
		return out
	}
	if diff := cmp.Diff([]string{"1.1.0", "1.0.0"}, resolvable()); diff != "" {
		t.Errorf("deprecated version not resolvable: %s", diff)
	}
	r, err := e.svc.Revoke(ctx, e.writer, old.ID, "broken")
	if err != nil || r.Revocation == nil || r.Revocation.Reason != "broken" {
		t.Fatalf("revoked: %+v, %v", r, err)
	}
	if diff := cmp.Diff([]string{"1.1.0"}, resolvable()); diff != "" {
		t.Errorf("revoked version resolvable: %s", diff)
	}
	listed, _, err := e.svc.ListVersions(ctx, e.reader, m.ID, registry.ListVersionsQuery{})
	if err != nil || len(listed) != 2 || listed[1].Revocation == nil {
		t.Errorf("version list without the revoked version: %+v, %v", listed, err)
	}
	if _, _, err := e.svc.OpenArchive(ctx, old.ID, *old.ArchiveSHA256); !errors.Is(err, fault.ErrNotFound) {
		t.Errorf("a revoked version's archive opened: %v", err)
	}
	if _, err := e.svc.Restore(ctx, e.writer, old.ID); !errors.Is(err, registry.ErrRevoked) {
		t.Errorf("restored while revoked: %v", err)
	}
	u, err := e.svc.Unrevoke(ctx, e.writer, old.ID)
	if err != nil || u.Revocation != nil || u.Deprecation == nil {
		t.Fatalf("un-revoked: %+v, %v", u, err)
	}
	back, err := e.svc.Restore(ctx, e.writer, old.ID)
	if err != nil || back.Deprecation != nil {
		t.Fatalf("restored: %+v, %v", back, err)
	}
	if _, err := e.svc.Unrevoke(ctx, e.writer, old.ID); !errors.Is(err, registry.ErrNotRevoked) {
		t.Errorf("un-revoked twice: %v", err)
	}
	want := []string{"deprecated", "revoked", "unrevoked", "restored"}
	var got []string
	for _, a := range e.auditActions(t) {
		if s, ok := strings.CutPrefix(a, "registry_module_version."); ok && s != "created" && s != "published" {
			got = append(got, s)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
}

func TestConcurrentCreateVersionOneWins(t *testing.T) {
	t.Parallel()
	e := setup(t)
	m := e.module(t, "network")
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = e.svc.CreateVersion(context.Background(), e.writer, m.ID, "3.0.0", registry.VersionOrigin{})
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, registry.ErrVersionExists) || !errors.Is(err, fault.ErrConflict):
			t.Errorf("loser's error: %v", err)
		}
	}
	if won != 1 {
		t.Errorf("%d creations won, want 1", won)
	}
}

func TestDeletionRemovesArchivesAfterCommit(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	m := e.module(t, "network")
	one := e.publish(t, m.ID, "1.0.0", registrytest.Archive(t, registrytest.ModuleFiles("one")))
	e.publish(t, m.ID, "1.1.0", registrytest.Archive(t, registrytest.ModuleFiles("two")))
	if n := e.storedArchives(t); n != 2 {
		t.Fatalf("%d archives stored, want 2", n)
	}
	if err := e.svc.DeleteVersion(ctx, e.writer, one.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Version(ctx, e.writer, one.ID); !errors.Is(err, fault.ErrNotFound) {
		t.Errorf("deleted version still read: %v", err)
	}
	if n := e.storedArchives(t); n != 1 {
		t.Errorf("%d archives after deleting a version, want 1", n)
	}
	if err := e.svc.DeleteModulesByName(ctx, e.writer, "private", "acme", "network", nil); err != nil {
		t.Fatal(err)
	}
	if n := e.storedArchives(t); n != 0 {
		t.Errorf("%d archives after deleting the module, want 0", n)
	}
	if _, err := e.svc.Module(ctx, e.writer, m.ID); !errors.Is(err, fault.ErrNotFound) {
		t.Errorf("deleted module still read: %v", err)
	}
}

func TestListsPageInTheirOrder(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	for _, name := range []string{"zeta", "alpha", "network-core", "network-edge", "beta"} {
		e.module(t, name)
	}
	var names []string
	cursor := ""
	for {
		page, next, err := e.svc.ListModules(ctx, e.reader, registry.ListModulesQuery{Query: "A", Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range page {
			names = append(names, m.Name)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if diff := cmp.Diff([]string{"alpha", "beta", "zeta"}, names); diff != "" {
		t.Errorf("modules named like a (-want +got):\n%s", diff)
	}
	if _, _, err := e.svc.ListModules(ctx, e.reader, registry.ListModulesQuery{Query: "e", Cursor: cursor}); !errors.Is(err, registry.ErrInvalidCursor) {
		t.Errorf("a cursor of other filters accepted: %v", err)
	}
	m := e.module(t, "versions")
	want := []string{"10.0.0", "2.0.0", "2.0.0-rc.1", "1.10.0", "1.2.0", "1.2.0-beta.11", "1.2.0-beta.2", "1.2.0-alpha"}
	for _, v := range []string{"1.2.0-alpha", "1.10.0", "2.0.0-rc.1", "1.2.0-beta.2", "10.0.0", "1.2.0", "2.0.0", "1.2.0-beta.11"} {
		if _, err := e.svc.CreateVersion(ctx, e.writer, m.ID, v, registry.VersionOrigin{}); err != nil {
			t.Fatal(err)
		}
	}
	var versions []string
	cursor = ""
	for {
		page, next, err := e.svc.ListVersions(ctx, e.reader, m.ID, registry.ListVersionsQuery{Limit: 3, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range page {
			versions = append(versions, v.Version)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if diff := cmp.Diff(want, versions); diff != "" {
		t.Errorf("versions (-want +got):\n%s", diff)
	}
}

// TestListVersionsOfAThousand measures the version list of a module with
// 1,000 versions: the first /v1 page (100) and the whole resolvable list
// modules.v1 reads.
func TestListVersionsOfAThousand(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 1,000 versions")
	}
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	m := e.module(t, "big")
	published := e.publish(t, m.ID, "0.0.1", registrytest.Archive(t, registrytest.ModuleFiles("one")))
	if _, err := e.conn.Exec(`
		INSERT INTO registry_module_versions (id, module_id, organization_id, version, sort_key, status, blob_key,
		       archive_sha256, archive_bytes, facts, origin, created_by, created_at, published_at)
		SELECT 'modv_' || lpad(g::text, 26, '0'), module_id, organization_id, (g / 100) || '.' || (g % 100) || '.0',
		       '\x01' || convert_to((g / 100)::text, 'UTF8'), status, blob_key, archive_sha256, archive_bytes, facts,
		       origin, created_by, created_at, published_at
		  FROM registry_module_versions, generate_series(1, 999) g WHERE id = $1`, published.ID); err != nil {
		t.Fatal(err)
	}
	// The sort keys above are placeholders; give every row its real one.
	var rows []struct {
		ID      string `db:"id"`
		Version string `db:"version"`
	}
	if err := e.conn.Select(&rows, `SELECT id, version FROM registry_module_versions WHERE module_id = $1`, m.ID); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		sv, err := registry.ParseSemver(r.Version)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.conn.Exec(`UPDATE registry_module_versions SET sort_key = $2 WHERE id = $1`, r.ID, sv.Key()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.conn.Exec(`ANALYZE registry_module_versions`); err != nil {
		t.Fatal(err)
	}
	p99 := func(call func() int, want int) time.Duration {
		var took []time.Duration
		for range 200 {
			start := time.Now()
			if got := call(); got != want {
				t.Fatalf("%d versions, want %d", got, want)
			}
			took = append(took, time.Since(start))
		}
		slicesSort(took)
		return took[len(took)*99/100]
	}
	page := p99(func() int {
		vs, _, err := e.svc.ListVersions(ctx, e.reader, m.ID, registry.ListVersionsQuery{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return len(vs)
	}, 100)
	all := p99(func() int {
		vs, err := e.svc.ResolvableVersions(ctx, e.reader, "acme", "big", "aws")
		if err != nil {
			t.Fatal(err)
		}
		return len(vs)
	}, 1000)
	t.Logf("1,000 versions: ListVersions (page of 100) p99 %v; ResolvableVersions (all 1,000) p99 %v", page, all)
}

func slicesSort(d []time.Duration) {
	for i := 1; i < len(d); i++ {
		for j := i; j > 0 && d[j] < d[j-1]; j-- {
			d[j], d[j-1] = d[j-1], d[j]
		}
	}
}
