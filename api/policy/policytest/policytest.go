// Package policytest builds policy evaluation fixtures on a real test
// server (apitest) without a worker: a set built in-process and published
// through the trusted completion path, attached to a workspace, and a run
// whose plan attempt is running, as a worker would have started it. Tests
// of bundle grants and of sandboxed evaluation start from here.
package policytest

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/api/policy/rego/engine"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/e2e/devstack"
)

// Fixture is an organization owner with one workspace on a test server
// whose launch gate is open.
type Fixture struct {
	Env         *apitest.Env
	User        *apitest.User
	WorkspaceID string
}

// New creates an organization with a project and a workspace in env,
// whose launch gate apitest opened.
func New(t testing.TB, env *apitest.Env, name string) *Fixture {
	t.Helper()
	u := env.WithOrganization(name)
	var p, w struct{ ID string }
	u.Mutate(http.MethodPost, "/v1/projects", map[string]string{"name": name}).MustStatus(t, http.StatusCreated).Data(t, &p)
	u.Mutate(http.MethodPost, "/v1/workspaces", map[string]any{"project_id": p.ID, "name": name, "execution_settings": map[string]string{
		"tool_version": "1.10.6", "region": "us", "platform": "linux_amd64"}}).MustStatus(t, http.StatusCreated).Data(t, &w)
	return &Fixture{Env: env, User: u, WorkspaceID: w.ID}
}

// Version is a published policy version.
type Version struct {
	SetID, ID    string
	BundleSHA256 []byte
}

// Publish builds the Rego files in-process and publishes them as version 1
// of a new set called name, through the same trusted completion the
// builder uses.
func (f *Fixture) Publish(t testing.TB, name string, files map[string]string) Version {
	t.Helper()
	u := f.User
	var set struct{ ID string }
	u.Mutate(http.MethodPost, "/v1/policy-sets", map[string]string{"name": name}).MustStatus(t, http.StatusCreated).Data(t, &set)
	var v struct{ ID string }
	u.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/workspaces/" + f.WorkspaceID + "/policy-sets/" + set.ID + "/versions",
		Body: devstack.TarGz(files), Header: map[string]string{"Content-Type": "application/gzip", "Idempotency-Key": apitest.NewKey()}}).
		MustStatus(t, http.StatusAccepted).Data(t, &v)

	ctx := context.Background()
	policies := f.Env.Server.Services().Policies
	b, ok, err := policies.PendingBuild(ctx, v.ID)
	if err != nil || !ok {
		t.Fatalf("pending build of %s: %v %v", name, ok, err)
	}
	dir := t.TempDir()
	for file, body := range files {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var bundle, results bytes.Buffer
	report, err := engine.Build(ctx, dir, &bundle, &results)
	if err != nil {
		t.Fatalf("building %s: %v", name, err)
	}
	bundleArt, err := policies.StoreBuildArtifact(ctx, b.Version, policy.ArtifactBundle, bytes.NewReader(bundle.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	resultsArt, err := policies.StoreBuildArtifact(ctx, b.Version, policy.ArtifactTestResults, bytes.NewReader(results.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := policies.CompleteBuild(ctx, policy.Completion{OrganizationID: b.Version.OrganizationID, PolicyVersionID: v.ID,
		SourceSHA256: b.Version.SourceSHA256, BundleArtifactID: bundleArt.ID, BundleSHA256: bundleArt.SHA256,
		TestResultsArtifactID: resultsArt.ID, TestResultsSHA256: resultsArt.SHA256, TestsPassed: report.Passed}); err != nil {
		t.Fatalf("publishing %s: %v", name, err)
	}
	return Version{SetID: set.ID, ID: v.ID, BundleSHA256: bundleArt.SHA256}
}

// Attach attaches a version to the fixture's workspace.
func (f *Fixture) Attach(t testing.TB, v Version, mode string) {
	t.Helper()
	f.User.Mutate(http.MethodPost, "/v1/workspaces/"+f.WorkspaceID+"/policy-attachments", map[string]string{
		"policy_set_id": v.SetID, "policy_version_id": v.ID, "enforcement_mode": mode}).MustStatus(t, http.StatusCreated)
}

// StartPlan creates a speculative run (no other run of the workspace holds
// one back) of a one-resource configuration (its
// policy snapshot is taken then) and starts its plan attempt as a worker
// would: the attempt is running and holds its capacity lease.
func (f *Fixture) StartPlan(t testing.TB) run.Started {
	t.Helper()
	u := f.User
	var cfg, created struct{ ID string }
	u.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/workspaces/" + f.WorkspaceID + "/configuration-versions",
		Body:   devstack.TarGz(map[string]string{"main.tf": "resource \"terraform_data\" \"a\" {}\n"}),
		Header: map[string]string{"Content-Type": "application/gzip", "Idempotency-Key": apitest.NewKey()}}).
		MustStatus(t, http.StatusCreated).Data(t, &cfg)
	u.Mutate(http.MethodPost, "/v1/runs", map[string]string{"workspace_id": f.WorkspaceID, "configuration_version_id": cfg.ID,
		"kind": "speculative"}).MustStatus(t, http.StatusCreated).Data(t, &created)
	ctx := context.Background()
	runs := f.Env.Server.Services().Runs
	r, err := runs.RunOwner(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	attempts, err := runs.Attempts(ctx, f.Env.DB, r)
	if err != nil || len(attempts) != 1 {
		t.Fatalf("attempts of %s: %v %v", r.ID, attempts, err)
	}
	st, err := runs.StartAttempt(ctx, attempts[0].ID, "policytest", "local")
	if err != nil {
		t.Fatalf("starting the plan attempt: %v", err)
	}
	return st
}
