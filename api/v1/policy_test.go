package v1_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/api/policy/rego/engine"
	"github.com/cairnhq/cairn/e2e/devstack"
)

const corpus = "../../e2e/testdata/policies"

func corpusArchive(t *testing.T, name string) []byte {
	t.Helper()
	files := map[string]string{}
	entries, err := os.ReadDir(filepath.Join(corpus, name))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		body, err := os.ReadFile(filepath.Join(corpus, name, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = string(body)
	}
	return devstack.TarGz(files)
}

type versionDoc struct {
	ID               string  `json:"id"`
	Number           int     `json:"number"`
	Status           string  `json:"status"`
	SourceArtifactID string  `json:"source_artifact_id"`
	SourceSHA256     string  `json:"source_sha256"`
	FailureCode      *string `json:"failure_code"`
}

// TestPolicyPublicationTrustsOnlyCommittedDigests drives the trusted
// completion path without a worker: a completion whose digests or
// artifacts differ from the committed rows is a conflict and publishes
// nothing, an identical completion is a replay, a failure after
// publication is a conflict, and the reconciler redelivers a due dispatch
// once per claim.
func TestPolicyPublicationTrustsOnlyCommittedDigests(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("policy")
	w := newWorkspace(t, u, newProject(t, u, "p"), "builds")
	var set struct{ ID string }
	u.Mutate(http.MethodPost, "/v1/policy-sets", map[string]string{"name": "require-tags"}).MustStatus(t, http.StatusCreated).Data(t, &set)
	key := apitest.NewKey()
	upload := func(body []byte) *apitest.Response {
		return u.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/workspaces/" + w.ID + "/policy-sets/" + set.ID + "/versions",
			Body: body, Header: map[string]string{"Content-Type": "application/gzip", "Idempotency-Key": key}})
	}
	archive := corpusArchive(t, "require-tags")
	var v versionDoc
	upload(archive).MustStatus(t, http.StatusAccepted).Data(t, &v)
	if v.Status != "pending" || v.Number != 1 || v.SourceArtifactID == "" {
		t.Fatalf("uploaded version %+v", v)
	}
	// The same key and archive replay the answer; another archive conflicts.
	var replay versionDoc
	upload(archive).MustStatus(t, http.StatusAccepted).Data(t, &replay)
	if replay.ID != v.ID {
		t.Fatalf("replay created %s, first was %s", replay.ID, v.ID)
	}
	if r := upload(corpusArchive(t, "always-pass")); r.Status != http.StatusConflict || r.Code() != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("same key, other archive: %d %s", r.Status, r.Body)
	}
	// Public clients cannot attach what is not published.
	if r := u.Mutate(http.MethodPost, "/v1/workspaces/"+w.ID+"/policy-attachments", map[string]string{
		"policy_version_id": v.ID, "enforcement_mode": "advisory"}); r.Status != http.StatusConflict || r.Code() != "POLICY_VERSION_NOT_PUBLISHED" {
		t.Fatalf("attaching a pending version: %d %s", r.Status, r.Body)
	}

	ctx := context.Background()
	policies := env.Server.Services().Policies
	// The reconciler: nothing is due until the first backoff passes; the
	// build job is still queued (no worker here), so the due record waits
	// rather than counting a delivery.
	if _, err := env.DB.Exec(`UPDATE workflow_dispatches SET next_attempt_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if r, err := policies.Reconcile(ctx); err != nil || r.Claimed != 1 || r.Waiting != 1 || r.Redelivered != 0 {
		t.Fatalf("first reconcile: %+v %v", r, err)
	}
	if r, err := policies.Reconcile(ctx); err != nil || r.Claimed != 0 {
		t.Fatalf("a claimed dispatch was taken again: %+v %v", r, err)
	}

	b, ok, err := policies.PendingBuild(ctx, v.ID)
	if err != nil || !ok {
		t.Fatalf("pending build: %v %v", ok, err)
	}
	var bundle, results bytes.Buffer
	report, err := engine.Build(ctx, filepath.Join(corpus, "require-tags"), &bundle, &results)
	if err != nil {
		t.Fatal(err)
	}
	// A retried build replaces what an earlier attempt stored.
	earlier, err := policies.StoreBuildArtifact(ctx, b.Version, policy.ArtifactBundle, bytes.NewReader(bundle.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	bundleArt, err := policies.StoreBuildArtifact(ctx, b.Version, policy.ArtifactBundle, bytes.NewReader(bundle.Bytes()))
	if err != nil {
		t.Fatalf("storing the bundle again: %v", err)
	}
	resultsArt, err := policies.StoreBuildArtifact(ctx, b.Version, policy.ArtifactTestResults, bytes.NewReader(results.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	good := policy.Completion{OrganizationID: u.OrganizationID, PolicyVersionID: v.ID, SourceSHA256: b.Version.SourceSHA256,
		BundleArtifactID: bundleArt.ID, BundleSHA256: bundleArt.SHA256, TestResultsArtifactID: resultsArt.ID,
		TestResultsSHA256: resultsArt.SHA256, TestsPassed: report.Passed}
	for name, mutate := range map[string]func(*policy.Completion){
		"changed bundle digest":  func(c *policy.Completion) { c.BundleSHA256 = make([]byte, 32) },
		"changed results digest": func(c *policy.Completion) { c.TestResultsSHA256 = make([]byte, 32) },
		"changed source digest":  func(c *policy.Completion) { c.SourceSHA256 = make([]byte, 32) },
		"another artifact":       func(c *policy.Completion) { c.BundleArtifactID = resultsArt.ID },
		"a replaced artifact":    func(c *policy.Completion) { c.BundleArtifactID = earlier.ID },
		"no tenant":              func(c *policy.Completion) { c.OrganizationID = "" },
		"another tenant":         func(c *policy.Completion) { c.OrganizationID = "org_other" },
		"another version":        func(c *policy.Completion) { c.PolicyVersionID = "pol_other" },
	} {
		c := good
		mutate(&c)
		if _, err := policies.CompleteBuild(ctx, c); !errors.Is(err, policy.ErrCompletionConflict) {
			t.Fatalf("%s: %v, want a conflict", name, err)
		}
	}
	if u.Get("/v1/policy-versions/"+v.ID).MustStatus(t, http.StatusOK).Data(t, &v); v.Status != "pending" {
		t.Fatalf("a conflicting completion published: %+v", v)
	}
	if _, err := policies.CompleteBuild(ctx, good); err != nil {
		t.Fatalf("completion: %v", err)
	}
	if _, err := policies.CompleteBuild(ctx, good); err != nil {
		t.Fatalf("identical completion is a replay: %v", err)
	}
	if _, err := policies.FailBuild(ctx, v.ID, policy.FailureTests); !errors.Is(err, policy.ErrCompletionConflict) {
		t.Fatalf("failing a published version: %v", err)
	}
	if _, err := policies.StoreBuildArtifact(ctx, b.Version, policy.ArtifactBundle, bytes.NewReader(bundle.Bytes())); !errors.Is(err, policy.ErrCompletionConflict) {
		t.Fatalf("storing an artifact of a published version: %v", err)
	}
	if u.Get("/v1/policy-versions/"+v.ID).MustStatus(t, http.StatusOK).Data(t, &v); v.Status != "published" {
		t.Fatalf("published version %+v", v)
	}
	var dispatch string
	if err := env.DB.Get(&dispatch, `SELECT status FROM workflow_dispatches WHERE id = $1`, policy.DispatchID(v.ID)); err != nil || dispatch != "completed" {
		t.Fatalf("dispatch %s %v", dispatch, err)
	}

	// Trusted clients may rebuild a committed source, naming its digest.
	rebuild := func(digest string) *apitest.Response {
		return u.Mutate(http.MethodPost, "/v1/policy-sets/"+set.ID+"/versions", map[string]string{
			"workspace_id": w.ID, "source_artifact_id": v.SourceArtifactID, "source_sha256": digest})
	}
	if r := rebuild(strings.Repeat("0", 64)); r.Status != http.StatusConflict || r.Code() != "POLICY_SOURCE_MISMATCH" {
		t.Fatalf("rebuild with another digest: %d %s", r.Status, r.Body)
	}
	var second versionDoc
	rebuild(v.SourceSHA256).MustStatus(t, http.StatusAccepted).Data(t, &second)
	if second.Number != 2 || second.Status != "pending" || second.SourceSHA256 != hex.EncodeToString(b.Version.SourceSHA256) {
		t.Fatalf("rebuilt version %+v", second)
	}
}
