package run_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/credential"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/run/runtest"
	"github.com/cairnhq/cairn/api/workspace"
	"github.com/cairnhq/cairn/e2e/devstack"
)

// agentOf is the principal an agent access token with mcp:write gives an
// agent acting for the owner.
func (h *harness) agentOf() access.Principal {
	return access.Principal{Kind: access.KindUser, ID: h.owner.ID, OrganizationID: h.owner.OrganizationID, Role: access.RoleOwner,
		Permissions: access.AgentPermissions(access.RoleOwner, true),
		Agent:       &access.Agent{ClientID: "cli_agent", GrantID: "grt_agent", TokenID: "oat_agent", Write: true}}
}

// person is the owner signed in to the dashboard.
func (h *harness) person() access.Principal {
	return access.Principal{Kind: access.KindUser, ID: h.owner.ID, OrganizationID: h.owner.OrganizationID, Role: access.RoleOwner,
		Permissions: access.PermissionsOf(access.RoleOwner)}
}

// createAs creates a run as p, in one transaction as the API does.
func (h *harness) createAs(p access.Principal, in run.CreateInput) (run.Run, error) {
	var out run.Run
	err := db.WithTx(h.ctx, h.env.DB, func(tx *sqlx.Tx) (err error) {
		out, err = h.runs.CreateRun(h.ctx, tx, p, in)
		return err
	})
	return out, err
}

func (h *harness) releaseAs(p access.Principal, runID string) (run.Run, error) {
	var out run.Run
	err := db.WithTx(h.ctx, h.env.DB, func(tx *sqlx.Tx) (err error) {
		out, err = h.runs.ReleaseRun(h.ctx, tx, p, runID)
		return err
	})
	return out, err
}

// snapshotOf decodes what a run pinned, as stored: its variables' keys and
// sensitivity and the credential versions.
func (h *harness) snapshotOf(r run.Run) (sensitive, plain []string, credentials int) {
	t := h.t
	t.Helper()
	var stored []byte
	if err := h.env.DB.Get(&stored, `SELECT input_snapshot FROM runs WHERE id = $1`, r.ID); err != nil {
		t.Fatal(err)
	}
	var snap struct {
		Variables []struct {
			Key       string `json:"key"`
			Sensitive bool   `json:"sensitive"`
		} `json:"variables"`
		Credentials []json.RawMessage `json:"credentials"`
	}
	if err := json.Unmarshal(stored, &snap); err != nil {
		t.Fatal(err)
	}
	for _, v := range snap.Variables {
		if v.Sensitive {
			sensitive = append(sensitive, v.Key)
		} else {
			plain = append(plain, v.Key)
		}
	}
	return sensitive, plain, len(snap.Credentials)
}

// TestAgentRunsPlanWithoutSecretsUntilAPersonReleasesThem: a run an agent
// starts pins no sensitive variable and no credential, gets no run token
// and no credential handle, plans against no state and can never wait for
// an approval; a person (not the agent, not a reader) releases it as a new
// run of their own that pins everything, keeps the agent as initiator, and
// is audited; a run can be released once, and only an agent's.
func TestAgentRunsPlanWithoutSecretsUntilAPersonReleasesThem(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.workspace("agent-proposals")
	h.variable(ws, "region", "eu-west-1", false, false)
	h.variable(ws, "db_password", "hunter2-sensitive", true, false)
	h.genericSecret(ws, "api_key", "generic-secret-value")
	cv := h.uploadConfiguration(ws)

	proposal, err := h.createAs(h.agentOf(), run.CreateInput{WorkspaceID: ws, ConfigurationVersionID: cv, Kind: run.KindPlanAndApply,
		Message: "an agent's proposal", Source: "api"})
	if err != nil {
		t.Fatal(err)
	}
	if proposal.Initiator != run.InitiatorAgent || !proposal.Untrusted() || *proposal.UntrustedReason != run.UntrustedAgent {
		t.Fatalf("agent's run: initiator %q, untrusted %v", proposal.Initiator, proposal.UntrustedReason)
	}
	sensitive, plain, creds := h.snapshotOf(proposal)
	if len(sensitive) != 0 || creds != 0 || !slices.Equal(plain, []string{"region"}) {
		t.Fatalf("agent's run pinned sensitive %v, plain %v, %d credentials", sensitive, plain, creds)
	}
	var pinnedCopies int
	if err := h.env.DB.Get(&pinnedCopies, `SELECT count(*) FROM run_variable_values WHERE run_id = $1`, proposal.ID); err != nil {
		t.Fatal(err)
	}
	if pinnedCopies != 1 {
		t.Fatalf("agent's run has %d pinned values, want the non-sensitive one", pinnedCopies)
	}

	st := h.start(proposal, run.PhasePlan)
	if st.Credentials != nil {
		t.Fatalf("an agent's plan was issued a credential handle: %+v", st.Credentials.Manifest)
	}
	if _, err := h.runs.IssueToken(h.ctx, st, 0); !errors.Is(err, run.ErrUntrustedInputs) {
		t.Fatalf("run token for an agent's plan: %v", err)
	}
	inputs, err := h.runs.RunInputs(h.ctx, st.Run)
	if err != nil || len(inputs) != 1 || inputs[0].Key != "region" {
		t.Fatalf("agent's plan inputs: %+v %v", inputs, err)
	}
	// Its plan names no predecessor state, and ends the run: nothing it
	// planned can be approved.
	planned := runtest.CommitStarted(t, h.env, h.runs, st, planJSON(t), true, nil)
	if planned.Status != run.StatusPlannedAndFinished || planned.TerminalReason == nil ||
		*planned.TerminalReason != run.TerminalCredentialsWithheld {
		t.Fatalf("agent's planned run: %s %v", planned.Status, planned.TerminalReason)
	}
	if actions := run.AvailableActions(planned, nil, h.agentOf(), time.Now()); slices.Contains(actions, run.ActionRelease) {
		t.Fatalf("an agent is offered its own release: %v", actions)
	}
	if actions := run.AvailableActions(planned, nil, h.person(), time.Now()); !slices.Contains(actions, run.ActionRelease) {
		t.Fatalf("a person is not offered the release: %v", actions)
	}

	// Neither the agent nor a reader may release it.
	if _, err := h.releaseAs(h.agentOf(), proposal.ID); !errors.Is(err, fault.ErrForbidden) {
		t.Fatalf("agent released its own run: %v", err)
	}
	reader := h.person()
	reader.Role, reader.Permissions = access.RoleReader, access.PermissionsOf(access.RoleReader)
	if _, err := h.releaseAs(reader, proposal.ID); !errors.Is(err, fault.ErrForbidden) {
		t.Fatalf("reader released a run: %v", err)
	}

	released, err := h.releaseAs(h.person(), proposal.ID)
	if err != nil {
		t.Fatal(err)
	}
	if released.Untrusted() || released.Initiator != run.InitiatorAgent || released.ReleasedFromRunID == nil ||
		*released.ReleasedFromRunID != proposal.ID || released.CreatedByID != h.owner.ID || released.Kind != run.KindPlanAndApply ||
		released.ConfigurationVersionID != cv {
		t.Fatalf("released run: %+v", released)
	}
	sensitive, _, creds = h.snapshotOf(released)
	if !slices.Equal(sensitive, []string{"db_password"}) || creds != 1 {
		t.Fatalf("released run pinned sensitive %v and %d credentials", sensitive, creds)
	}
	if rst := h.start(released, run.PhasePlan); rst.Credentials == nil {
		t.Fatal("the released run's plan got no credential handle")
	}
	proposal = h.read(proposal.ID)
	if proposal.ReleasedRunID == nil || *proposal.ReleasedRunID != released.ID || proposal.ReleasedByID == nil ||
		*proposal.ReleasedByID != h.owner.ID || proposal.ReleasedAt == nil {
		t.Fatalf("agent's run does not record its release: %+v", proposal)
	}
	var audited struct {
		ActorID  string `db:"actor_id"`
		Evidence []byte `db:"evidence"`
	}
	if err := h.env.DB.Get(&audited, `SELECT actor_id, evidence FROM audit_events WHERE action = 'run.released' AND target_id = $1`,
		proposal.ID); err != nil {
		t.Fatalf("no run.released audit event: %v", err)
	}
	var evidence map[string]any
	_ = json.Unmarshal(audited.Evidence, &evidence)
	if audited.ActorID != h.owner.ID || evidence["released_run_id"] != released.ID {
		t.Fatalf("run.released audit: %s %v", audited.ActorID, evidence)
	}
	if _, err := h.releaseAs(h.person(), proposal.ID); !errors.Is(err, run.ErrAlreadyReleased) {
		t.Fatalf("second release: %v", err)
	}
	if _, err := h.releaseAs(h.person(), released.ID); !errors.Is(err, run.ErrNotReleasable) {
		t.Fatalf("release of a person's run: %v", err)
	}
}

// TestReleasingAnUnfinishedAgentRunCancelsItFirst: the two never run side
// by side, and the person's run is the one that plans.
func TestReleasingAnUnfinishedAgentRunCancelsItFirst(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.workspace("agent-unfinished")
	proposal, err := h.createAs(h.agentOf(), run.CreateInput{WorkspaceID: ws, ConfigurationVersionID: h.uploadConfiguration(ws),
		Kind: run.KindPlanOnly, Source: "api"})
	if err != nil {
		t.Fatal(err)
	}
	if proposal.Status != run.StatusPlanQueued {
		t.Fatalf("agent's run: %s", proposal.Status)
	}
	released, err := h.releaseAs(h.person(), proposal.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.read(proposal.ID); got.Status != run.StatusCanceled {
		t.Fatalf("agent's run after its release: %s", got.Status)
	}
	if released.Status != run.StatusPlanQueued || released.Kind != run.KindPlanOnly {
		t.Fatalf("released run: %s %s", released.Status, released.Kind)
	}
}

// pullRequestRun creates the speculative run the code host creates for a
// pull request of the workspace's repository, from a fork or not.
func (h *harness) pullRequestRun(workspaceID, cv string, fork bool) run.Run {
	h.t.Helper()
	number := 7
	r, err := h.createAs(access.CodeHost(h.owner.OrganizationID), run.CreateInput{WorkspaceID: workspaceID, ConfigurationVersionID: cv,
		Kind: run.KindSpeculative, Source: run.SourceVCS, Message: "Pull request #7",
		CodeHost: &run.CodeHostSource{Provider: "github", IngestionID: id.New("sin"), InstallationID: 1, RepositoryID: 2,
			Owner: "acme", Name: "infra", CommitSHA: strings.Repeat("a", 40), Ref: "refs/pull/7/head", PullNumber: &number,
			Fork: fork, ConfigurationVersionID: cv}})
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// TestPullRequestRunsPinNoSensitiveVariable: a pull request's speculative
// snapshot names no sensitive variable (SPEC §6), a fork's is untrusted
// besides, and a snapshot that names one anyway is refused before anything
// is unsealed. A person's own speculative plan (the CLI's) keeps them.
func TestPullRequestRunsPinNoSensitiveVariable(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.workspace("speculative-inputs")
	h.variable(ws, "region", "eu-west-1", false, false)
	h.variable(ws, "db_password", "hunter2-sensitive", true, false)
	cv := h.uploadConfiguration(ws)
	cli, err := h.createAs(h.person(), run.CreateInput{WorkspaceID: ws, ConfigurationVersionID: cv, Kind: run.KindSpeculative, Source: "tfe"})
	if err != nil {
		t.Fatal(err)
	}
	if sensitive, _, _ := h.snapshotOf(cli); cli.Untrusted() || !slices.Equal(sensitive, []string{"db_password"}) {
		t.Fatalf("a person's speculative run: untrusted %v, sensitive %v", cli.UntrustedReason, sensitive)
	}
	sameRepo := h.pullRequestRun(ws, cv, false)
	fork := h.pullRequestRun(ws, cv, true)
	for name, r := range map[string]run.Run{"same-repository": sameRepo, "fork": fork} {
		if sensitive, plain, _ := h.snapshotOf(r); len(sensitive) != 0 || !slices.Equal(plain, []string{"region"}) {
			t.Fatalf("%s pull request pinned sensitive %v, plain %v", name, sensitive, plain)
		}
		if r.Initiator != run.InitiatorCodeHost {
			t.Fatalf("%s pull request's initiator: %s", name, r.Initiator)
		}
	}
	if sameRepo.Untrusted() || !fork.Untrusted() || *fork.UntrustedReason != run.UntrustedFork || fork.Releasable() {
		t.Fatalf("untrusted: same-repository %v, fork %v", sameRepo.UntrustedReason, fork.UntrustedReason)
	}
	// The pull request's run with a snapshot that names the sensitive
	// variable, as the person's does: refused, whatever else matches.
	for _, r := range []run.Run{sameRepo, fork} {
		if _, err := h.env.DB.Exec(`UPDATE runs SET (input_snapshot, input_snapshot_without_variables) =
			(SELECT input_snapshot, input_snapshot_without_variables FROM runs WHERE id = $2) WHERE id = $1`,
			r.ID, cli.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := h.runs.RunInputs(h.ctx, h.read(r.ID)); !errors.Is(err, run.ErrUntrustedInputs) {
			t.Fatalf("a pull request's snapshot naming a sensitive variable: %v", err)
		}
	}
}

// TestUntrustedRunWithPinnedCredentialsGetsNone: were an untrusted run's
// snapshot ever to name credential versions, its phase is refused them at
// issuance and ends without a sandbox.
func TestUntrustedRunWithPinnedCredentialsGetsNone(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.workspace("untrusted-credentials")
	h.genericSecret(ws, "api_key", "generic-secret-value")
	cv := h.uploadConfiguration(ws)
	proposal, err := h.createAs(h.agentOf(), run.CreateInput{WorkspaceID: ws, ConfigurationVersionID: cv, Kind: run.KindPlanOnly, Source: "api"})
	if err != nil {
		t.Fatal(err)
	}
	trusted, err := h.createAs(h.person(), run.CreateInput{WorkspaceID: ws, ConfigurationVersionID: cv, Kind: run.KindPlanOnly, Source: "api"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.env.DB.Exec(`UPDATE runs SET (input_snapshot, input_snapshot_without_variables) =
			(SELECT input_snapshot, input_snapshot_without_variables FROM runs WHERE id = $2) WHERE id = $1`,
		proposal.ID, trusted.ID); err != nil {
		t.Fatal(err)
	}
	_, err = h.runs.StartAttempt(h.ctx, h.queued(proposal, run.PhasePlan).ID, "test-worker", "local")
	if !errors.Is(err, run.ErrCredentialsUnavailable) {
		t.Fatalf("starting an untrusted plan naming credentials: %v", err)
	}
	if got := h.read(proposal.ID); got.Status != run.StatusCredentialsRequired || got.TerminalReason == nil ||
		*got.TerminalReason != "credential_withheld_untrusted" {
		t.Fatalf("untrusted run after its refused start: %s %v", got.Status, got.TerminalReason)
	}
}

// TestInitiatorIsWhoStartedTheRun: an agent acting for a person is the
// agent; tokens and the code host are themselves.
func TestInitiatorIsWhoStartedTheRun(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p    access.Principal
		want string
	}{
		{access.Principal{Kind: access.KindUser}, run.InitiatorUser},
		{access.Principal{Kind: access.KindUser, Agent: &access.Agent{}}, run.InitiatorAgent},
		{access.Principal{Kind: access.KindServiceAccount}, run.InitiatorServiceAccount},
		{access.CodeHost("org_x"), run.InitiatorCodeHost},
		{access.Principal{Kind: access.KindOperator}, run.InitiatorOperator},
	} {
		if got := run.InitiatorOf(c.p); got != c.want {
			t.Errorf("InitiatorOf(%+v) = %q, want %q", c.p, got, c.want)
		}
	}
}

// awsFederation gives the workspace a verified AWS federation version for
// plan_and_apply.
func (h *harness) awsFederation(workspaceID string) {
	h.t.Helper()
	var p, v struct{ ID string }
	h.owner.Mutate(http.MethodPost, "/v1/workspaces/"+workspaceID+"/credential-profiles", map[string]string{"provider": "aws"}).
		MustStatus(h.t, http.StatusCreated).Data(h.t, &p)
	h.owner.Mutate(http.MethodPost, "/v1/credential-profiles/"+p.ID+"/versions", map[string]any{"phase": "plan_and_apply",
		"configuration": map[string]string{"role_arn": "arn:aws:iam::123456789012:role/cairn-runs"}}).
		MustStatus(h.t, http.StatusCreated).Data(h.t, &v)
	h.owner.Mutate(http.MethodPost, "/v1/credential-profiles/"+p.ID+"/versions/"+v.ID+"/actions/verify", nil).MustStatus(h.t, http.StatusOK)
}

// initiatorClaim redeems a started plan's credentials and returns the
// run_initiator claim of the workload-identity token they hold.
func (h *harness) initiatorClaim(st run.Started) string {
	h.t.Helper()
	m, err := h.runs.RedeemCredentials(h.ctx, st, h.t.TempDir())
	if err != nil {
		h.t.Fatal(err)
	}
	token := m.Files[credential.AWSTokenFile]
	parts := strings.Split(string(token), ".")
	if len(parts) != 3 {
		h.t.Fatalf("no AWS web identity token among %v", slices.Collect(maps.Keys(m.Files)))
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		h.t.Fatal(err)
	}
	var claims struct {
		Initiator string `json:"run_initiator"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		h.t.Fatal(err)
	}
	return claims.Initiator
}

// TestWorkloadIdentityNamesWhoStartedTheRun: a person's run says user; a
// run a person released from an agent's proposal still says agent, so a
// cloud's trust policy can refuse it.
func TestWorkloadIdentityNamesWhoStartedTheRun(t *testing.T) {
	t.Parallel()
	h := setup(t)
	federation := launch.Default()
	federation.PublicGate, federation.FederationProviders["aws"] = true, true
	if _, _, err := h.env.Server.Services().Launch.Apply(h.ctx, launch.Change{Actor: "test", RequestID: "req_test", ExpectedVersion: 1,
		IdempotencyKey: apitest.NewKey(), Reason: "test: federation on", Document: federation}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		release bool
		want    string
	}{{"a person's run", false, run.InitiatorUser}, {"a released agent run", true, run.InitiatorAgent}} {
		ws := h.workspace("initiator-" + strings.ReplaceAll(strings.ReplaceAll(c.name, " ", "-"), "'", ""))
		h.awsFederation(ws)
		cv := h.uploadConfiguration(ws)
		starter := h.person()
		if c.release {
			starter = h.agentOf()
		}
		r, err := h.createAs(starter, run.CreateInput{WorkspaceID: ws, ConfigurationVersionID: cv, Kind: run.KindPlanOnly, Source: "api"})
		if err != nil {
			t.Fatal(err)
		}
		if c.release {
			// The agent's queued run is canceled and the person's runs
			// in its place.
			if r, err = h.releaseAs(h.person(), r.ID); err != nil {
				t.Fatal(err)
			}
		}
		if got := h.initiatorClaim(h.start(h.read(r.ID), run.PhasePlan)); got != c.want {
			t.Fatalf("%s's token says run_initiator %q, want %q", c.name, got, c.want)
		}
	}
}

// agentUpload uploads a configuration as an agent with mcp:write does
// through its upload_configuration tool: the same staging and creating
// transaction as /v1, as the agent's principal.
func (h *harness) agentUpload(workspaceID string, files map[string]string) string {
	h.t.Helper()
	staged, err := h.runs.StageArchive(h.ctx, h.owner.OrganizationID, bytes.NewReader(devstack.TarGz(files)))
	if err != nil {
		h.t.Fatal(err)
	}
	var cv run.ConfigurationVersion
	if err := db.WithTx(h.ctx, h.env.DB, func(tx *sqlx.Tx) (err error) {
		cv, err = h.runs.CreateUploadedConfiguration(h.ctx, tx, h.agentOf(), workspaceID, staged)
		return err
	}); err != nil {
		h.t.Fatal(err)
	}
	return cv.ID
}

// TestAgentConfigurationIsUntrustedWhoeverRunsIt: an agent's upload
// becomes the workspace's current configuration, and a person's run of the
// current configuration (POST /v1/runs without configuration_version_id,
// as the dashboard's Start run does) runs the agent's code: it is
// untrusted like the agent's own run, pins no sensitive variable and no
// credential, and gets neither at its start. Releasing it is the one way
// to run that code with them.
func TestAgentConfigurationIsUntrustedWhoeverRunsIt(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.workspace("agent-current-config")
	h.variable(ws, "db_password", "hunter2-sensitive", true, false)
	h.genericSecret(ws, "api_key", "generic-secret-value")
	h.uploadConfiguration(ws) // the person's own configuration, before the agent's
	agentCV := h.agentUpload(ws, map[string]string{"main.tf": `variable "db_password" { default = "" }
output "loot" { value = nonsensitive(var.db_password) }`})

	var created struct{ ID string }
	h.owner.Mutate(http.MethodPost, "/v1/runs", map[string]string{"workspace_id": ws, "kind": "plan_only", "message": "routine plan"}).
		MustStatus(t, http.StatusCreated).Data(t, &created)
	r := h.read(created.ID)
	if r.ConfigurationVersionID != agentCV {
		t.Fatalf("the run uses %s, not the agent's current configuration %s", r.ConfigurationVersionID, agentCV)
	}
	sensitive, _, creds := h.snapshotOf(r)
	if !r.Untrusted() || *r.UntrustedReason != run.UntrustedAgent || r.Initiator != run.InitiatorUser || len(sensitive) != 0 || creds != 0 {
		t.Fatalf("a person's run of the agent's configuration: untrusted %v, initiator %s, pinned sensitive %v and %d credentials",
			r.UntrustedReason, r.Initiator, sensitive, creds)
	}
	st := h.start(r, run.PhasePlan)
	if st.Credentials != nil {
		t.Fatal("the agent's configuration got a credential handle")
	}
	inputs, err := h.runs.RunInputs(h.ctx, st.Run)
	if err != nil || slices.ContainsFunc(inputs, func(v workspace.ResolvedVariable) bool { return v.Sensitive }) {
		t.Fatalf("the agent's configuration got the sensitive variable (%v)", err)
	}

	released, err := h.releaseAs(h.person(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if sensitive, _, creds := h.snapshotOf(released); released.Untrusted() || released.ConfigurationVersionID != agentCV ||
		len(sensitive) != 1 || creds != 1 {
		t.Fatalf("the released run: untrusted %v, configuration %s, pinned sensitive %v and %d credentials",
			released.UntrustedReason, released.ConfigurationVersionID, sensitive, creds)
	}
}
