package v1_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/api/policy/rego"
	"github.com/cairnhq/cairn/api/policy/rego/engine"
)

// versionRecord is everything GET /v1/policy-versions/{id} says about
// what a version was built from and with.
type versionRecord struct {
	ID                string  `json:"id"`
	PolicySetID       string  `json:"policy_set_id"`
	Number            int     `json:"number"`
	Status            string  `json:"status"`
	FailureCode       *string `json:"failure_code"`
	WorkspaceID       string  `json:"workspace_id"`
	SettingsVersion   int     `json:"settings_version"`
	ToolVersion       string  `json:"tool_version"`
	Region            string  `json:"region"`
	SourceArtifactID  string  `json:"source_artifact_id"`
	SourceSHA256      string  `json:"source_sha256"`
	SourceSizeBytes   int64   `json:"source_size_bytes"`
	BundleSHA256      *string `json:"bundle_sha256"`
	TestResultsSHA256 *string `json:"test_results_sha256"`
	TestsPassed       *int    `json:"tests_passed"`
	EngineVersion     string  `json:"engine_version"`
	Capabilities      struct {
		ID     string `json:"id"`
		SHA256 string `json:"sha256"`
	} `json:"capabilities"`
	Entrypoint string     `json:"entrypoint"`
	FinishedAt *time.Time `json:"finished_at"`
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestPolicyVersionRecordsWhatItWasBuiltWith (SPEC §2 Policy version):
// a version pins the workspace settings version current at its upload
// (with its tool version and region) and records the source digest and
// size, then the bundle and test-result digests of its build, the engine
// version, the capabilities manifest identity with its digest, and the
// entrypoint. A later settings change pins the next version only.
func TestPolicyVersionRecordsWhatItWasBuiltWith(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("versions")
	w := newWorkspace(t, u, newProject(t, u, "p"), "builds")
	var set struct{ ID string }
	u.Mutate(http.MethodPost, "/v1/policy-sets", map[string]string{"name": "require-tags"}).MustStatus(t, http.StatusCreated).Data(t, &set)
	upload := func(archive []byte) versionRecord {
		t.Helper()
		var v versionRecord
		u.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/workspaces/" + w.ID + "/policy-sets/" + set.ID + "/versions",
			Body: archive, Header: map[string]string{"Content-Type": "application/gzip", "Idempotency-Key": apitest.NewKey()}}).
			MustStatus(t, http.StatusAccepted).Data(t, &v)
		return v
	}
	read := func(id string) versionRecord {
		t.Helper()
		var v versionRecord
		u.Get("/v1/policy-versions/"+id).MustStatus(t, http.StatusOK).Data(t, &v)
		return v
	}
	capabilities, err := rego.CapabilitiesDigest()
	if err != nil {
		t.Fatal(err)
	}
	boundToEngine := func(v versionRecord) bool {
		return v.EngineVersion == rego.EngineVersion && v.Capabilities.ID == rego.CapabilitiesID &&
			v.Capabilities.SHA256 == capabilities && v.Entrypoint == rego.Entrypoint
	}

	archive := corpusArchive(t, "require-tags")
	first := upload(archive)
	if first.Number != 1 || first.Status != policy.VersionPending || first.PolicySetID != set.ID || first.WorkspaceID != w.ID ||
		first.SettingsVersion != w.ExecutionSettings.Version || first.ToolVersion != "1.10.6" || first.Region != "us" ||
		first.SourceSHA256 != hexSum(archive) || first.SourceSizeBytes != int64(len(archive)) || first.SourceArtifactID == "" ||
		first.BundleSHA256 != nil || first.TestResultsSHA256 != nil || first.TestsPassed != nil || first.FinishedAt != nil || !boundToEngine(first) {
		t.Fatalf("pending version: %+v", first)
	}

	// Its build, as the sandboxed builder would report it.
	ctx := context.Background()
	policies := env.Server.Services().Policies
	b, ok, err := policies.PendingBuild(ctx, first.ID)
	if err != nil || !ok {
		t.Fatalf("pending build: %v %v", ok, err)
	}
	var bundle, results bytes.Buffer
	report, err := engine.Build(ctx, filepath.Join(corpus, "require-tags"), &bundle, &results)
	if err != nil {
		t.Fatal(err)
	}
	bundleArt, err := policies.StoreBuildArtifact(ctx, b.Version, policy.ArtifactBundle, bytes.NewReader(bundle.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	resultsArt, err := policies.StoreBuildArtifact(ctx, b.Version, policy.ArtifactTestResults, bytes.NewReader(results.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := policies.CompleteBuild(ctx, policy.Completion{OrganizationID: u.OrganizationID, PolicyVersionID: first.ID,
		SourceSHA256: b.Version.SourceSHA256, BundleArtifactID: bundleArt.ID, BundleSHA256: bundleArt.SHA256,
		TestResultsArtifactID: resultsArt.ID, TestResultsSHA256: resultsArt.SHA256, TestsPassed: report.Passed}); err != nil {
		t.Fatal(err)
	}
	published := read(first.ID)
	if published.Status != policy.VersionPublished || published.FailureCode != nil || published.FinishedAt == nil ||
		published.BundleSHA256 == nil || *published.BundleSHA256 != hexSum(bundle.Bytes()) ||
		published.TestResultsSHA256 == nil || *published.TestResultsSHA256 != hexSum(results.Bytes()) ||
		published.TestsPassed == nil || *published.TestsPassed != report.Passed || report.Passed == 0 ||
		published.SettingsVersion != first.SettingsVersion || published.SourceSHA256 != first.SourceSHA256 || !boundToEngine(published) {
		t.Fatalf("published version: %+v", published)
	}

	// New settings: the next version pins them, the first keeps its own.
	var changed ws
	u.Mutate(http.MethodPatch, "/v1/workspaces/"+w.ID, map[string]any{"execution_settings": map[string]string{
		"tool_version": "1.10.6", "region": "eu", "platform": "linux_amd64"}}).MustStatus(t, http.StatusOK).Data(t, &changed)
	if changed.ExecutionSettings.Version <= w.ExecutionSettings.Version {
		t.Fatalf("settings version after a change: %d", changed.ExecutionSettings.Version)
	}
	second := upload(corpusArchive(t, "always-pass"))
	if second.Number != 2 || second.SettingsVersion != changed.ExecutionSettings.Version || second.Region != "eu" ||
		second.SourceSHA256 == first.SourceSHA256 {
		t.Fatalf("second version: %+v", second)
	}
	if again := read(first.ID); again.SettingsVersion != first.SettingsVersion || again.Region != "us" {
		t.Fatalf("the first version after a settings change: %+v", again)
	}
}
