package v1_test

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/api/policy/inprocess"
	cairnrun "github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/e2e/devstack"
)

// persisted is everything a refused mutation could have left behind: the
// rows of every table a mutation here writes, and the sealed objects.
type persisted map[string]int

func snapshot(t *testing.T, env *apitest.Env) persisted {
	t.Helper()
	out := persisted{}
	for _, table := range []string{"projects", "workspaces", "workspace_settings_versions", "workspace_variables",
		"configuration_versions", "runs", "run_attempts", "policy_sets", "policy_versions", "policy_artifacts",
		"policy_attachments", "workflow_dispatches", "state_versions", "audit_events", "idempotency_records", "river_job"} {
		out[table] = countRows(t, env, `SELECT count(*) FROM `+table)
	}
	out["uploaded configuration versions"] = countRows(t, env, `SELECT count(*) FROM configuration_versions WHERE status <> 'pending'`)
	out["variable values"] = countRows(t, env, `SELECT count(DISTINCT (id, value_version)) FROM workspace_variables`)
	objects := 0
	_ = filepath.WalkDir(filepath.Join(env.Config.DataDir, "blobs"), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			objects++
		}
		return nil
	})
	out["sealed objects"] = objects
	return out
}

func (before persisted) mustEqual(t *testing.T, after persisted, what string) {
	t.Helper()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s persisted something: %s went from %d to %d", what, k, v, after[k])
		}
	}
}

// cloud calls /api/v2 with a user API token.
func cloud(env *apitest.Env, token, method, path string, body any) *apitest.Response {
	env.T.Helper()
	return env.Anonymous().Do(apitest.Request{Method: method, Path: path, Body: body,
		Header: map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/vnd.api+json"}})
}

func userToken(t *testing.T, u *apitest.User) string {
	t.Helper()
	var tok struct{ Token string }
	u.Mutate(http.MethodPost, "/v1/user-tokens", map[string]string{"description": "cli"}).MustStatus(t, http.StatusCreated).Data(t, &tok)
	return tok.Token
}

func gzipUpload(u *apitest.User, path string, body []byte) *apitest.Response {
	return u.Do(apitest.Request{Method: http.MethodPost, Path: path, Body: body,
		Header: map[string]string{"Content-Type": "application/gzip", "Idempotency-Key": apitest.NewKey()}})
}

var configArchive = devstack.TarGz(map[string]string{"main.tf": `resource "terraform_data" "x" { input = "y" }` + "\n"})

// TestClosedGateAdmitsOnlyTheExactCanaryPair closes the public gate with
// one canary pair: a configuration upload (native and through a capability
// URL), a policy upload and variable writes to another workspace of the
// same organization each get the non-disclosing 503 and persist nothing,
// and so does every organization-wide mutation; the canary workspace
// itself is admitted.
func TestClosedGateAdmitsOnlyTheExactCanaryPair(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Canary")
	proj := newProject(t, u, "P")
	canary := newWorkspace(t, u, proj, "canary")
	other := newWorkspace(t, u, proj, "other")
	token := userToken(t, u)
	var set, variable struct{ ID string }
	u.Mutate(http.MethodPost, "/v1/policy-sets", map[string]string{"name": "guard"}).MustStatus(t, http.StatusCreated).Data(t, &set)
	u.Mutate(http.MethodPost, "/v1/workspaces/"+other.ID+"/variables", map[string]any{"key": "region", "value": "us-east-1", "sensitive": false}).
		MustStatus(t, http.StatusCreated).Data(t, &variable)
	// A pending configuration version of the other workspace, created while
	// the gate was open, holds a signed upload URL.
	cv := cloud(env, token, http.MethodPost, "/api/v2/workspaces/"+other.ID+"/configuration-versions",
		map[string]any{"data": map[string]any{"type": "configuration-versions", "attributes": map[string]any{"auto-queue-runs": false}}}).
		MustStatus(t, http.StatusCreated)
	var cvDoc struct {
		Data struct {
			ID         string `json:"id"`
			Attributes struct {
				UploadURL string `json:"upload-url"`
			} `json:"attributes"`
		} `json:"data"`
	}
	cv.JSON(t, &cvDoc)
	uploadPath := strings.TrimPrefix(cvDoc.Data.Attributes.UploadURL, env.URL)
	if !strings.HasPrefix(uploadPath, "/api/v2/configuration-versions/") {
		t.Fatalf("upload URL %q", cvDoc.Data.Attributes.UploadURL)
	}

	c := launch.Default()
	c.CanaryAllowlist = []launch.Pair{{OrganizationID: u.OrganizationID, WorkspaceID: canary.ID}}
	applyControl(t, env, "canary-only", 1, c)

	before := snapshot(t, env)
	refused := map[string]*apitest.Response{
		"configuration upload": gzipUpload(u, "/v1/workspaces/"+other.ID+"/configuration-versions", configArchive),
		"policy upload":        gzipUpload(u, "/v1/workspaces/"+other.ID+"/policy-sets/"+set.ID+"/versions", corpusArchive(t, "require-tags")),
		"variable create": u.Mutate(http.MethodPost, "/v1/workspaces/"+other.ID+"/variables",
			map[string]any{"key": "token_count", "value": "3", "sensitive": false}),
		"variable replace": u.Mutate(http.MethodPut, "/v1/workspace-variables/"+variable.ID,
			map[string]any{"value": "eu-west-1", "sensitive": false}),
		"variable delete":  u.Mutate(http.MethodDelete, "/v1/workspace-variables/"+variable.ID, nil),
		"workspace update": u.Mutate(http.MethodPatch, "/v1/workspaces/"+other.ID, map[string]any{"execution_settings": usSettings, "name": "renamed"}),
		"policy rebuild": u.Mutate(http.MethodPost, "/v1/policy-sets/"+set.ID+"/versions", map[string]any{
			"workspace_id": other.ID, "source_artifact_id": "pol_aaaaaaaaaaaaaaaaaaaaaaaaaa", "source_sha256": strings.Repeat("0", 64)}),
		"attach at organization scope": u.Mutate(http.MethodPost, "/v1/policy-sets/"+set.ID+"/attachments", map[string]any{
			"policy_version_id": "pol_aaaaaaaaaaaaaaaaaaaaaaaaaa", "enforcement_mode": "advisory", "scope": "organization"}),
		// Organization- and project-wide mutations: no canary opens them.
		"project create":    u.Mutate(http.MethodPost, "/v1/projects", map[string]string{"name": "Q"}),
		"workspace create":  u.Mutate(http.MethodPost, "/v1/workspaces", map[string]any{"project_id": proj, "name": "third", "execution_settings": usSettings}),
		"policy set create": u.Mutate(http.MethodPost, "/v1/policy-sets", map[string]string{"name": "another"}),
		// Unknown workspaces are answered exactly like refused ones.
		"upload to an unknown workspace": gzipUpload(u, "/v1/workspaces/ws_aaaaaaaaaaaaaaaaaaaaaaaaaa/configuration-versions", configArchive),
		// A run names its workspace in the body; it is admitted before
		// anything about the run is looked at.
		"run create": u.Mutate(http.MethodPost, "/v1/runs", map[string]any{"workspace_id": other.ID,
			"configuration_version_id": cvDoc.Data.ID, "kind": "plan_only"}),
		"run create in an unknown workspace": u.Mutate(http.MethodPost, "/v1/runs", map[string]any{
			"workspace_id": "ws_aaaaaaaaaaaaaaaaaaaaaaaaaa", "configuration_version_id": cvDoc.Data.ID, "kind": "plan_only"}),
		"remote-backend configuration version": cloud(env, token, http.MethodPost, "/api/v2/workspaces/"+other.ID+"/configuration-versions",
			map[string]any{"data": map[string]any{"type": "configuration-versions"}}),
		"capability upload": env.Anonymous().Do(apitest.Request{Method: http.MethodPut, Path: uploadPath, Body: configArchive,
			Header: map[string]string{"Content-Type": "application/octet-stream"}}),
	}
	for what, r := range refused {
		if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") != "60" ||
			r.Header.Get("Cache-Control") != "private, no-store" || r.Header.Get("X-Request-Id") == "" ||
			!strings.Contains(string(r.Body), "service_unavailable") || !strings.Contains(string(r.Body), r.Header.Get("X-Request-Id")) {
			t.Errorf("%s: not the non-disclosing 503: %d %v %s", what, r.Status, r.Header, r.Body)
		}
		if strings.Contains(string(r.Body), other.ID) || strings.Contains(string(r.Body), canary.ID) {
			t.Errorf("%s: the refusal names a workspace: %s", what, r.Body)
		}
	}
	before.mustEqual(t, snapshot(t, env), "a refused request")

	// The exact canary pair is admitted: the same requests succeed there.
	var uploaded struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	gzipUpload(u, "/v1/workspaces/"+canary.ID+"/configuration-versions", configArchive).MustStatus(t, http.StatusCreated).Data(t, &uploaded)
	if uploaded.Status != "uploaded" {
		t.Fatalf("canary upload %+v", uploaded)
	}
	gzipUpload(u, "/v1/workspaces/"+canary.ID+"/policy-sets/"+set.ID+"/versions", corpusArchive(t, "require-tags")).
		MustStatus(t, http.StatusAccepted)
	u.Mutate(http.MethodPost, "/v1/workspaces/"+canary.ID+"/variables", map[string]any{"key": "token_count", "value": "3", "sensitive": false}).
		MustStatus(t, http.StatusCreated)
	cloud(env, token, http.MethodGet, "/api/v2/workspaces/"+canary.ID, nil).MustStatus(t, http.StatusOK)
	// Reads of the refused workspace on the native API are not gated.
	u.Get("/v1/workspaces/"+other.ID).MustStatus(t, http.StatusOK)
}

// operatorCall calls the operator API with the test server's token.
func operatorCall(env *apitest.Env, method, path, key string, body any) *apitest.Response {
	env.T.Helper()
	h := map[string]string{"Authorization": "Bearer " + apitest.OperatorToken}
	if key != "" {
		h["Idempotency-Key"] = key
	}
	return env.Anonymous().Do(apitest.Request{Method: method, Path: path, Body: body, Header: h})
}

// TestSuspendedWorkspaceRefusesMutationsButServesReadsAndCancel suspends
// one workspace through the operator API: its mutations get the
// non-disclosing 503 and persist nothing, while reads, cancellation and
// the organization's other workspaces go on. Suspend and lift are
// versioned and idempotent, and the tenant's audit trail shows that it
// happened but never the operator's reason.
func TestSuspendedWorkspaceRefusesMutationsButServesReadsAndCancel(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Suspended")
	proj := newProject(t, u, "P")
	w := newWorkspace(t, u, proj, "held")
	neighbour := newWorkspace(t, u, proj, "neighbour")
	token := userToken(t, u)
	var cv, variable struct{ ID string }
	gzipUpload(u, "/v1/workspaces/"+w.ID+"/configuration-versions", configArchive).MustStatus(t, http.StatusCreated).Data(t, &cv)
	u.Mutate(http.MethodPost, "/v1/workspaces/"+w.ID+"/variables", map[string]any{"key": "region", "value": "us-east-1", "sensitive": false}).
		MustStatus(t, http.StatusCreated).Data(t, &variable)
	newRun := func() string {
		var r struct{ ID string }
		u.Mutate(http.MethodPost, "/v1/runs", map[string]any{"workspace_id": w.ID, "configuration_version_id": cv.ID, "kind": "plan_only"}).
			MustStatus(t, http.StatusCreated).Data(t, &r)
		return r.ID
	}
	first, second := newRun(), newRun()

	const reason = "chargeback investigation 7731 (private)"
	subject := map[string]any{"organization_id": u.OrganizationID, "workspace_id": w.ID, "expected_version": 0, "reason": reason}
	suspended := operatorCall(env, http.MethodPost, "/operator/v1/suspensions", "suspend-1", subject).MustStatus(t, http.StatusOK)
	var rec struct {
		Version   int  `json:"version"`
		Suspended bool `json:"suspended"`
	}
	suspended.Data(t, &rec)
	if rec.Version != 1 || !rec.Suspended {
		t.Fatalf("suspension %s", suspended.Body)
	}
	// A retry with the key returns the first answer; other input under the
	// key conflicts; a stale expected version is refused.
	replay := operatorCall(env, http.MethodPost, "/operator/v1/suspensions", "suspend-1", subject).MustStatus(t, http.StatusOK)
	if first, again := envelopeData(t, suspended.Body), envelopeData(t, replay.Body); first != again || replay.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay differs:\n%s\n%s", suspended.Body, replay.Body)
	}
	changed := map[string]any{"organization_id": u.OrganizationID, "workspace_id": w.ID, "expected_version": 0, "reason": "another reason"}
	if r := operatorCall(env, http.MethodPost, "/operator/v1/suspensions", "suspend-1", changed); r.Status != http.StatusConflict || r.Code() != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("changed input under the key: %d %s", r.Status, r.Body)
	}
	stale := map[string]any{"organization_id": u.OrganizationID, "workspace_id": w.ID, "expected_version": 0, "reason": "resolved"}
	if r := operatorCall(env, http.MethodPost, "/operator/v1/suspensions/actions/lift", "lift-stale", stale); r.Status != http.StatusConflict ||
		r.Code() != "SUSPENSION_VERSION_CONFLICT" {
		t.Fatalf("stale lift: %d %s", r.Status, r.Body)
	}

	before := snapshot(t, env)
	refused := map[string]*apitest.Response{
		"configuration upload": gzipUpload(u, "/v1/workspaces/"+w.ID+"/configuration-versions", configArchive),
		"variable create": u.Mutate(http.MethodPost, "/v1/workspaces/"+w.ID+"/variables",
			map[string]any{"key": "zone", "value": "a", "sensitive": false}),
		"variable replace": u.Mutate(http.MethodPut, "/v1/workspace-variables/"+variable.ID, map[string]any{"value": "eu-west-1", "sensitive": false}),
		"workspace update": u.Mutate(http.MethodPatch, "/v1/workspaces/"+w.ID, map[string]any{"execution_settings": usSettings, "name": "renamed"}),
		"run create": u.Mutate(http.MethodPost, "/v1/runs", map[string]any{"workspace_id": w.ID, "configuration_version_id": cv.ID,
			"kind": "plan_only"}),
		"remote-backend lock": cloud(env, token, http.MethodPost, "/api/v2/workspaces/"+w.ID+"/actions/lock", nil),
		"remote-backend configuration version": cloud(env, token, http.MethodPost, "/api/v2/workspaces/"+w.ID+"/configuration-versions",
			map[string]any{"data": map[string]any{"type": "configuration-versions"}}),
	}
	for what, r := range refused {
		if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") != "60" || !strings.Contains(string(r.Body), "service_unavailable") {
			t.Errorf("%s on a suspended workspace: %d %s", what, r.Status, r.Body)
		}
	}
	before.mustEqual(t, snapshot(t, env), "a request to a suspended workspace")

	// Reads go on, on both surfaces, and so do the probes the dashboard
	// renders the workspace and its runs behind.
	u.Get("/v1/launch-access/workspaces/"+w.ID).MustStatus(t, http.StatusOK)
	u.Get("/v1/launch-access/runs/"+first).MustStatus(t, http.StatusOK)
	u.Get("/v1/workspaces/"+w.ID).MustStatus(t, http.StatusOK)
	u.Get("/v1/workspaces/"+w.ID+"/variables").MustStatus(t, http.StatusOK)
	u.Get("/v1/runs/"+first).MustStatus(t, http.StatusOK)
	cloud(env, token, http.MethodGet, "/api/v2/workspaces/"+w.ID, nil).MustStatus(t, http.StatusOK)
	cloud(env, token, http.MethodGet, "/api/v2/runs/"+first, nil).MustStatus(t, http.StatusOK)
	// So does cancellation, on both surfaces.
	var canceled struct{ Status string }
	u.Mutate(http.MethodPost, "/v1/runs/"+first+"/actions/cancel", nil).MustStatus(t, http.StatusOK).Data(t, &canceled)
	if canceled.Status != "canceled" {
		t.Fatalf("canceled run is %q", canceled.Status)
	}
	cloud(env, token, http.MethodPost, "/api/v2/runs/"+second+"/actions/cancel", nil).MustStatus(t, http.StatusAccepted)
	if n := countRows(t, env, `SELECT count(*) FROM runs WHERE id IN ($1, $2) AND status = 'canceled'`, first, second); n != 2 {
		t.Fatalf("%d of 2 runs canceled", n)
	}
	// Another workspace of the organization is not suspended.
	u.Mutate(http.MethodPost, "/v1/workspaces/"+neighbour.ID+"/variables", map[string]any{"key": "zone", "value": "a", "sensitive": false}).
		MustStatus(t, http.StatusCreated)

	// The tenant's trail records the suspension without the reason, also
	// for an event recorded before suspensions were versioned.
	if _, err := env.DB.Exec(`INSERT INTO audit_events (id, organization_id, action, actor_type, actor_id, target_type, target_id, request_id, evidence)
		VALUES ('aud_legacy', $1, 'launch.suspended', 'operator', 'cli:ops', 'suspension', 'sus_legacy', 'req_legacy',
		jsonb_build_object('workspace_id', $2::text, 'reason', $3::text))`, u.OrganizationID, w.ID, reason); err != nil {
		t.Fatal(err)
	}
	events := u.Get("/v1/audit-events?limit=100").MustStatus(t, http.StatusOK)
	if !strings.Contains(string(events.Body), `"launch.suspended"`) || !strings.Contains(string(events.Body), "aud_legacy") {
		t.Fatalf("no suspension in the tenant's trail: %s", events.Body)
	}
	if strings.Contains(string(events.Body), "chargeback") || strings.Contains(string(events.Body), `"reason"`) {
		t.Fatalf("the operator's reason reached the tenant: %s", events.Body)
	}
	// The operator reads the history with its reasons.
	history := operatorCall(env, http.MethodGet, "/operator/v1/suspensions?organization_id="+u.OrganizationID+"&workspace_id="+w.ID, "", nil).
		MustStatus(t, http.StatusOK)
	if !strings.Contains(string(history.Body), "chargeback") || !strings.Contains(string(history.Body), `"version":1`) {
		t.Fatalf("operator history %s", history.Body)
	}

	// Lifted with the current version, the workspace takes mutations again.
	lift := map[string]any{"organization_id": u.OrganizationID, "workspace_id": w.ID, "expected_version": 1, "reason": "resolved"}
	operatorCall(env, http.MethodPost, "/operator/v1/suspensions/actions/lift", "lift-1", lift).MustStatus(t, http.StatusOK)
	u.Mutate(http.MethodPost, "/v1/workspaces/"+w.ID+"/variables", map[string]any{"key": "zone", "value": "a", "sensitive": false}).
		MustStatus(t, http.StatusCreated)
}

// envelopeData is an enveloped body's data, as text.
func envelopeData(t *testing.T, body []byte) string {
	t.Helper()
	data, _ := envelopeParts(t, body)
	return string(data)
}

// TestPolicyBuildsAndRunsFollowLaunchControl drives the worker-side entry
// points without a worker: a policy build rechecks admission when it
// starts and holds one regional capacity lease until it ends, jobs go on
// the queues the control routes them to, and a policy stage on a release
// the control does not allow is an error.
func TestPolicyBuildsAndRunsFollowLaunchControl(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	ctx := context.Background()
	admission := env.Server.V1Services().Launch
	policies := env.Server.Services().Policies
	u := env.WithOrganization("Builds")
	w := newWorkspace(t, u, newProject(t, u, "P"), "builds")
	var set struct{ ID string }
	u.Mutate(http.MethodPost, "/v1/policy-sets", map[string]string{"name": "guard"}).MustStatus(t, http.StatusCreated).Data(t, &set)
	upload := func() string {
		var v struct{ ID string }
		gzipUpload(u, "/v1/workspaces/"+w.ID+"/policy-sets/"+set.ID+"/versions", corpusArchive(t, "require-tags")).
			MustStatus(t, http.StatusAccepted).Data(t, &v)
		return v.ID
	}
	first, second := upload(), upload()
	leases := func() int {
		return countRows(t, env, `SELECT count(*) FROM capacity_leases WHERE policy_version_id IS NOT NULL AND released_at IS NULL`)
	}

	// One sandbox slot in "us".
	c := launch.Default()
	c.PublicGate = true
	c.Ceilings.SandboxesPerRegion["us"] = 1
	applyControl(t, env, "one-slot", 1, c)
	// A suspended build workspace does not start its build.
	if _, _, err := admission.Suspend(ctx, launch.SuspensionChange{Actor: "ops", RequestID: "r", IdempotencyKey: "s",
		OrganizationID: u.OrganizationID, WorkspaceID: w.ID, Reason: "hold"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := policies.StartBuild(ctx, first); !errors.Is(err, policy.ErrBuildNotAdmitted) {
		t.Fatalf("build of a suspended workspace started: %v", err)
	}
	if _, _, err := admission.Lift(ctx, launch.SuspensionChange{Actor: "ops", RequestID: "r", IdempotencyKey: "l",
		OrganizationID: u.OrganizationID, WorkspaceID: w.ID, ExpectedVersion: 1, Reason: "go"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := policies.StartBuild(ctx, first); err != nil || !ok {
		t.Fatalf("build start: %v %v", ok, err)
	}
	if _, ok, err := policies.StartBuild(ctx, first); err != nil || !ok || leases() != 1 {
		t.Fatalf("replayed build start: %v %v, %d leases", ok, err, leases())
	}
	if _, _, err := policies.StartBuild(ctx, second); !errors.Is(err, policy.ErrBuildNoCapacity) {
		t.Fatalf("a second build exceeded the ceiling: %v", err)
	}
	// The build's end releases its lease, and the next build gets it.
	if _, err := policies.FailBuild(ctx, first, policy.FailureCompile); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := policies.StartBuild(ctx, second); err != nil || !ok || leases() != 1 {
		t.Fatalf("next build: %v %v, %d leases", ok, err, leases())
	}

	// A release the control does not allow: builds wait, policy stages err.
	c.PolicyReleases = []string{"opa-0.0.1"}
	c.WorkflowRouting = map[string]string{launch.WorkflowRun: "default", launch.WorkflowPolicy: "default"}
	applyControl(t, env, "other-release", 2, c)
	if _, _, err := policies.StartBuild(ctx, upload()); !errors.Is(err, policy.ErrBuildNotAdmitted) {
		t.Fatalf("build on a release not allowed: %v", err)
	}
	var cv, r struct{ ID string }
	gzipUpload(u, "/v1/workspaces/"+w.ID+"/configuration-versions", configArchive).MustStatus(t, http.StatusCreated).Data(t, &cv)
	u.Mutate(http.MethodPost, "/v1/runs", map[string]any{"workspace_id": w.ID, "configuration_version_id": cv.ID, "kind": "plan_only"}).
		MustStatus(t, http.StatusCreated).Data(t, &r)
	runs := env.Server.V1Services().Runs
	p, err := env.Server.V1Services().Identity.AuthenticateSession(ctx, u.Token)
	if err != nil {
		t.Fatal(err)
	}
	run, err := runs.GetRun(ctx, p, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := runs.EvaluatePolicy(ctx, runStarted(run), make([]byte, 32), strings.NewReader("{}"), nil,
		inprocess.New(env.Server.Services().Policies))
	if err != nil || ev.Check.Outcome != policy.OutcomeError || ev.Check.ConfigurationError == nil ||
		*ev.Check.ConfigurationError != "policy_release_not_allowed" {
		t.Fatalf("policy stage on a release not allowed: %+v %v", ev.Check, err)
	}
	// Jobs went where the control routed them: the first builds to the
	// policy queue, the later build and the run's plan to default.
	var queues []string
	if err := env.DB.Select(&queues, `SELECT kind || ':' || queue FROM river_job ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	want := []string{"policy_publication:policy", "policy_publication:policy", "policy_publication:default", "run_phase:default"}
	if strings.Join(queues, " ") != strings.Join(want, " ") {
		t.Fatalf("jobs on %v, want %v", queues, want)
	}
}

// runStarted is a run as the policy stage sees it before any attempt
// started: enough for the release check, which decides before a grant.
func runStarted(r cairnrun.Run) cairnrun.Started { return cairnrun.Started{Run: r} }
