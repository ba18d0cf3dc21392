package run_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/workspace"
	"github.com/cairnhq/cairn/e2e/devstack"
)

// inTx runs fn in one committed transaction, as the handlers do.
func (h *harness) inTx(fn func(tx *sqlx.Tx) error) error {
	return db.WithTx(h.ctx, h.env.DB, fn)
}

func (h *harness) ownerPrincipal() access.Principal {
	return access.Principal{Kind: access.KindUser, ID: h.owner.ID, OrganizationID: h.owner.OrganizationID, Role: access.RoleOwner,
		Permissions: access.PermissionsOf(access.RoleOwner), ReauthenticatedAt: time.Now()}
}

func (h *harness) lockHolder(workspaceID string) (kind, id string) {
	h.t.Helper()
	var row struct {
		Kind *string `db:"locked_by_kind"`
		ID   *string `db:"locked_by_id"`
	}
	if err := h.env.DB.Get(&row, `SELECT locked_by_kind, locked_by_id FROM workspaces WHERE id = $1`, workspaceID); err != nil {
		h.t.Fatal(err)
	}
	if row.Kind == nil {
		return "", ""
	}
	return *row.Kind, *row.ID
}

// TestActiveRunHoldsTheWorkspaceLock: a queued run locks its workspace
// until it ends; a user's unlock answers the run-lock error, the run's own
// CLI locking and unlocking does not release it, and the end does.
func TestActiveRunHoldsTheWorkspaceLock(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.workspace("held")
	r := h.createRun(ws)
	if kind, id := h.lockHolder(ws); kind != access.KindRun || id != r.ID {
		t.Fatalf("queued run's workspace locked by %q %q, want the run", kind, id)
	}
	workspaces := h.env.Server.Services().Workspaces
	owner := h.ownerPrincipal()
	if err := h.inTx(func(tx *sqlx.Tx) error {
		_, err := workspaces.UnlockWorkspace(h.ctx, tx, owner, ws)
		return err
	}); !errors.Is(err, workspace.ErrLockedByRun) {
		t.Fatalf("owner unlock of the run's lock: %v, want ErrLockedByRun", err)
	}
	if err := h.inTx(func(tx *sqlx.Tx) error {
		_, err := workspaces.LockWorkspace(h.ctx, tx, owner, ws, "mine")
		return err
	}); !errors.Is(err, workspace.ErrLocked) {
		t.Fatalf("owner lock while the run holds it: %v, want ErrLocked", err)
	}

	// Planned and awaiting approval, the run still holds it.
	r = h.plan(h.read(r.ID), planJSON(t))
	if kind, id := h.lockHolder(ws); r.Status != run.StatusAwaitingApproval || kind != access.KindRun || id != r.ID {
		t.Fatalf("run %s: workspace locked by %q %q", r.Status, kind, id)
	}
	// The apply's CLI locks and unlocks as tofu does; the run keeps the lock.
	h.approve(r.ID)
	st := h.start(h.read(r.ID), run.PhaseApply)
	token, err := h.runs.IssueToken(h.ctx, st, 0)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := h.runs.AuthenticateToken(h.ctx, token)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []func(context.Context, *sqlx.Tx, access.Principal, string) (workspace.Workspace, error){
		func(ctx context.Context, tx *sqlx.Tx, p access.Principal, id string) (workspace.Workspace, error) {
			return workspaces.LockWorkspace(ctx, tx, p, id, "Locked by OpenTofu")
		},
		workspaces.UnlockWorkspace,
	} {
		if err := h.inTx(func(tx *sqlx.Tx) error { _, err := step(h.ctx, tx, cli, ws); return err }); err != nil {
			t.Fatalf("the run's CLI: %v", err)
		}
	}
	if kind, id := h.lockHolder(ws); kind != access.KindRun || id != r.ID {
		t.Fatalf("after the CLI's unlock the workspace is locked by %q %q", kind, id)
	}
	// The apply's sandbox never started tofu: the run ends errored.
	if _, err := h.runs.FailUnstartedAttempt(h.ctx, st.Attempt.ID, "sandbox_failed", nil, run.Timings{}); err != nil {
		t.Fatal(err)
	}
	if got := h.read(r.ID); !got.Status.Terminal() {
		t.Fatalf("failed plan left the run %s", got.Status)
	}
	if kind, _ := h.lockHolder(ws); kind != "" {
		t.Fatalf("ended run left the workspace locked by %q", kind)
	}
}

// TestRunWithoutConfigurationUsesTheCurrentOne: a run named with no
// configuration version runs the workspace's current one; a provisional
// version becomes current only once a run uses it.
func TestRunWithoutConfigurationUsesTheCurrentOne(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.workspace("latest")
	owner := h.ownerPrincipal()
	first := h.createRun(ws)
	h.owner.Mutate(http.MethodPost, "/v1/runs/"+first.ID+"/actions/cancel", nil).MustStatus(t, http.StatusOK)

	var provisional run.ConfigurationVersion
	if err := h.inTx(func(tx *sqlx.Tx) error {
		var err error
		provisional, err = h.runs.CreateConfigurationVersion(h.ctx, tx, owner, ws, run.ConfigurationInput{Source: run.SourceAPI, Provisional: true})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.runs.UploadConfiguration(h.ctx, provisional.ID, bytes.NewReader(devstack.TarGz(map[string]string{"main.tf": `resource "terraform_data" "next" {}`}))); err != nil {
		t.Fatal(err)
	}
	current, err := h.runs.CurrentConfiguration(h.ctx, owner.OrganizationID, ws)
	if err != nil || current == nil || current.ID != first.ConfigurationVersionID {
		t.Fatalf("current with an unused provisional version: %+v %v, want %s", current, err, first.ConfigurationVersionID)
	}
	var latest run.Run
	if err := h.inTx(func(tx *sqlx.Tx) error {
		var err error
		latest, err = h.runs.CreateRun(h.ctx, tx, owner, run.CreateInput{WorkspaceID: ws, Kind: run.KindPlanOnly,
			Source: run.SourceAPI, LatestConfiguration: true})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if latest.ConfigurationVersionID != first.ConfigurationVersionID {
		t.Fatalf("run without a version used %s, want the current %s", latest.ConfigurationVersionID, first.ConfigurationVersionID)
	}
	if err := h.inTx(func(tx *sqlx.Tx) error {
		_, err := h.runs.CreateRun(h.ctx, tx, owner, run.CreateInput{WorkspaceID: ws, Kind: run.KindPlanOnly,
			Source: run.SourceAPI, ConfigurationVersionID: provisional.ID})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	current, err = h.runs.CurrentConfiguration(h.ctx, owner.OrganizationID, ws)
	if err != nil || current == nil || current.ID != provisional.ID {
		t.Fatalf("current after a run used the provisional version: %+v %v", current, err)
	}
}

// A transition holds its run's row lock until it commits; the phase's log
// writer inserts chunks that reference that row meanwhile (the policy log
// while the plan commits). The lock must not make the insert wait for the
// commit, yet it still excludes a second transition.
func TestTransitionsDoNotStallTheRunsLogWriter(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.createRun(h.workspace("nostall"))
	h.start(r, run.PhasePlan)
	p := h.ownerPrincipal()

	tx, err := h.env.DB.BeginTxx(h.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := h.runs.Cancel(h.ctx, tx, p, r.ID); err != nil {
		t.Fatalf("canceling inside the open transaction: %v", err)
	}

	ctx, cancel := context.WithTimeout(h.ctx, 3*time.Second)
	defer cancel()
	sink, err := h.runs.NewLogSink(ctx, r.ID, run.PhasePlan, nil)
	if err != nil {
		t.Fatal(err)
	}
	sink.Line("written while a transition of the run is uncommitted")
	began := time.Now()
	if err := sink.Flush(ctx, true); err != nil {
		t.Fatalf("the log chunk waited for the transition's commit (%v): %v", time.Since(began).Round(time.Millisecond), err)
	}

	// A second transition still waits for the first.
	second := make(chan error, 1)
	go func() {
		second <- h.inTx(func(tx *sqlx.Tx) error {
			_, err := h.runs.Cancel(h.ctx, tx, p, r.ID)
			return err
		})
	}()
	select {
	case err := <-second:
		t.Fatalf("a second transition ran while the first held the run: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-second; !errors.Is(err, run.ErrActionNotAllowed) {
		t.Fatalf("second cancel after the first committed: %v, want ErrActionNotAllowed", err)
	}
}
