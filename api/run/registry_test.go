package run_test

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/registry"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/e2e/devstack"
)

// TestRunTokenDownloadsAreTheRunsEvidence: a plan attempt's run token
// reads the organization's registry (no user credential), each version it
// resolves for download is recorded once against its attempt with the
// deprecation it had, the review shows it, and revoking the version
// changes none of it. A person's download records nothing.
func TestRunTokenDownloadsAreTheRunsEvidence(t *testing.T) {
	t.Parallel()
	h := setup(t)
	svc, owner := h.env.Server.Services().Registry, h.ownerPrincipal()
	mod, err := svc.CreateModule(h.ctx, owner, registry.CreateModuleInput{Name: "network", Provider: "aws"})
	if err != nil {
		t.Fatal(err)
	}
	versions := map[string]string{}
	for _, v := range []string{"1.0.0", "1.1.0"} {
		created, err := svc.CreateVersion(h.ctx, owner, mod.ID, v, registry.VersionOrigin{})
		if err != nil {
			t.Fatal(err)
		}
		archive := devstack.TarGz(map[string]string{"main.tf": `output "v" { value = "` + v + `" }`})
		if published, err := svc.PublishArchive(h.ctx, created.ID, bytes.NewReader(archive)); err != nil || published.Status != registry.VersionOK {
			t.Fatalf("publishing %s: %+v %v", v, published, err)
		}
		versions[v] = created.ID
	}
	deprecate := func(v string) {
		if _, err := svc.Deprecate(h.ctx, owner, versions[v], "moving to 2.x", ""); err != nil {
			t.Fatal(err)
		}
	}
	deprecate("1.0.0")

	r := h.createRun(h.workspace("modules"))
	st := h.start(r, run.PhasePlan)
	token, err := h.runs.IssueToken(h.ctx, st, 0)
	if err != nil {
		t.Fatal(err)
	}
	download := func(bearer, version string) {
		t.Helper()
		resp := h.env.Anonymous().Do(apitest.Request{Method: http.MethodGet,
			Path:   fmt.Sprintf("/api/registry/v1/modules/%s/network/aws/%s/download", mod.Namespace, version),
			Header: map[string]string{"Authorization": "Bearer " + bearer}})
		if resp.Status != http.StatusNoContent || resp.Header.Get("X-Terraform-Get") == "" {
			t.Fatalf("download %s: %d %s", version, resp.Status, resp.Body)
		}
	}
	h.env.Anonymous().Do(apitest.Request{Method: http.MethodGet, Path: "/api/registry/v1/modules/" + mod.Namespace + "/network/aws/versions",
		Header: map[string]string{"Authorization": "Bearer " + token}}).MustStatus(t, http.StatusOK)
	download(token, "1.0.0")
	download(token, "1.0.0") // a retry: still one record
	download(token, "1.1.0")
	var userToken struct{ Token string }
	h.owner.Mutate(http.MethodPost, "/v1/user-tokens", map[string]string{"description": "cli"}).MustStatus(t, http.StatusCreated).Data(t, &userToken)
	download(userToken.Token, "1.1.0")

	got, err := h.runs.AttemptRegistryModules(h.ctx, st.Attempt.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("recorded %+v, want 1.0.0 and 1.1.0 once each", got)
	}
	byVersion := map[string]run.RegistryModule{}
	for _, m := range got {
		byVersion[m.Version] = m
	}
	old, current := byVersion["1.0.0"], byVersion["1.1.0"]
	if old.VersionID != versions["1.0.0"] || !old.Deprecated || old.DeprecationReason == nil || *old.DeprecationReason != "moving to 2.x" ||
		old.Address != mod.Namespace+"/network/aws" || len(old.ArchiveSHA256) != 64 || old.Phase != run.PhasePlan || old.AttemptID != st.Attempt.ID {
		t.Fatalf("1.0.0 recorded as %+v", old)
	}
	if current.VersionID != versions["1.1.0"] || current.Deprecated || current.DeprecationReason != nil {
		t.Fatalf("1.1.0 recorded as %+v", current)
	}

	type evidence struct {
		Evidence struct {
			RegistryModules []map[string]any `json:"registry_modules"`
		} `json:"evidence"`
	}
	var before, after evidence
	h.owner.Get("/v1/runs/"+r.ID).MustStatus(t, http.StatusOK).Data(t, &before)
	if len(before.Evidence.RegistryModules) != 2 {
		t.Fatalf("review evidence %+v", before.Evidence.RegistryModules)
	}
	// Revoking (after deprecating) and deleting a version leave the run's
	// evidence as it was.
	deprecate("1.1.0")
	if _, err := svc.Revoke(h.ctx, owner, versions["1.1.0"], "withdrawn"); err != nil {
		t.Fatal(err)
	}
	if err := svc.DeleteVersion(h.ctx, owner, versions["1.0.0"]); err != nil {
		t.Fatal(err)
	}
	h.owner.Get("/v1/runs/"+r.ID).MustStatus(t, http.StatusOK).Data(t, &after)
	if fmt.Sprint(after.Evidence.RegistryModules) != fmt.Sprint(before.Evidence.RegistryModules) {
		t.Fatalf("evidence changed: %+v, was %+v", after.Evidence.RegistryModules, before.Evidence.RegistryModules)
	}
}
