package launch_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/dbtest"
	"github.com/cairnhq/cairn/api/platform/fault"
)

func TestDecideFailsClosedOnMissingAndMalformedControl(t *testing.T) {
	t.Parallel()
	conn := dbtest.New(t)
	svc := launch.NewService(conn, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	subject := launch.Subject{OrganizationID: "org_aaaaaaaaaaaaaaaaaaaaaaaaaa"}
	if d := svc.Decide(ctx, nil, subject); d.Admitted || d.Reason != "control_missing" {
		t.Fatalf("no control: %+v", d)
	}
	// A malformed document that got into the table admits nothing.
	if _, err := conn.Exec(`INSERT INTO launch_control_versions (version, document, actor, request_id, reason, idempotency_key)
		VALUES (1, '{"public_gate": true}', 'test', 'req', 'broken', 'k1')`); err != nil {
		t.Fatal(err)
	}
	if d := svc.Decide(ctx, nil, subject); d.Admitted {
		t.Fatalf("malformed control admitted: %+v", d)
	}
	// An operator repairs it by naming the broken version.
	open := launch.Default()
	open.PublicGate = true
	change := launch.Change{Actor: "ops", RequestID: "req_x", IdempotencyKey: "fix-1", ExpectedVersion: 1, Reason: "repair", Document: open}
	c, replayed, err := svc.Apply(ctx, change)
	if err != nil || replayed || c.Version != 2 {
		t.Fatalf("repair = %+v %v %v", c, replayed, err)
	}
	if d := svc.Decide(ctx, nil, subject); !d.Admitted {
		t.Fatalf("open gate refused: %+v", d)
	}
	if again, replayed, err := svc.Apply(ctx, change); err != nil || !replayed || again.Version != 2 || !again.PublicGate {
		t.Fatalf("replay = %+v %v %v", again, replayed, err)
	}
	closed := launch.Default()
	if _, _, err := svc.Apply(ctx, launch.Change{Actor: "ops", RequestID: "r", IdempotencyKey: "fix-1", ExpectedVersion: 1, Reason: "x", Document: closed}); !errors.Is(err, launch.ErrKeyReused) {
		t.Fatalf("key reuse = %v", err)
	}
	// The reason is input like the rest: the same change with another
	// reason under the key is not the request that was recorded.
	reworded := change
	reworded.Reason = "another reason"
	if _, _, err := svc.Apply(ctx, reworded); !errors.Is(err, launch.ErrKeyReused) {
		t.Fatalf("key reuse with another reason = %v", err)
	}
	if _, _, err := svc.Apply(ctx, launch.Change{Actor: "ops", RequestID: "r", IdempotencyKey: "stale", ExpectedVersion: 1, Reason: "x", Document: closed}); !errors.Is(err, launch.ErrVersionConflict) {
		t.Fatalf("stale expected version = %v", err)
	}
	var before, after string
	if err := conn.QueryRow(`SELECT before_document::text, document::text FROM launch_control_versions WHERE version = 2`).Scan(&before, &after); err != nil {
		t.Fatal(err)
	}
	if before != `{"public_gate": true}` || after == before {
		t.Fatalf("evidence before=%s after=%s", before, after)
	}
	if _, err := conn.Exec(`UPDATE launch_control_versions SET reason = 'rewritten' WHERE version = 1`); err == nil {
		t.Fatal("a control version was edited in place")
	}
}

// TestOldControlWithLaunchedOrganizationsAdmitsNothing stores a control
// of the old format, which launched a whole organization: it no longer
// parses, so it admits nothing rather than that organization.
func TestOldControlWithLaunchedOrganizationsAdmitsNothing(t *testing.T) {
	t.Parallel()
	svc, conn := newService(t)
	ctx := context.Background()
	const org = "org_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	old := map[string]any{}
	doc, _ := json.Marshal(launch.Default())
	_ = json.Unmarshal(doc, &old)
	old["launched_organizations"] = []string{org}
	raw, _ := json.Marshal(old)
	if _, err := conn.Exec(`INSERT INTO launch_control_versions (version, document, actor, request_id, reason, idempotency_key)
		VALUES (1, $1, 'old', 'req', 'launch one organization', 'old-1')`, string(raw)); err != nil {
		t.Fatal(err)
	}
	for _, subject := range []launch.Subject{{OrganizationID: org}, {OrganizationID: org, WorkspaceID: "ws_aaaaaaaaaaaaaaaaaaaaaaaaaa"}} {
		if d := svc.Decide(ctx, nil, subject); d.Admitted {
			t.Fatalf("an old-format control admitted %+v: %+v", subject, d)
		}
	}
	if q := svc.Queue(ctx, nil, launch.WorkflowRun); q != "" {
		t.Fatalf("an unreadable control routed runs to %q", q)
	}
}

func newService(t *testing.T) (*launch.Service, *sqlx.DB) {
	t.Helper()
	conn := dbtest.New(t)
	return launch.NewService(conn, slog.New(slog.NewTextHandler(io.Discard, nil))), conn
}

// seedTenant writes an organization with one workspace, as the rows the
// workspace service would write.
func seedTenant(t *testing.T, conn *sqlx.DB, orgID, wsID string) {
	t.Helper()
	project := "prj_" + orgID[4:]
	err := db.WithTx(context.Background(), conn, func(tx *sqlx.Tx) error {
		for _, st := range []struct {
			sql  string
			args []any
		}{
			{`INSERT INTO organizations (id, name, slug) VALUES ($1, 'Org', $2)`, []any{orgID, "org-" + orgID[4:12]}},
			{`INSERT INTO projects (id, organization_id, name, created_by) VALUES ($1, $2, 'P', 'test')`, []any{project, orgID}},
			{`INSERT INTO workspaces (id, organization_id, project_id, name, slug, cloud_name, current_settings_version, created_by)
				VALUES ($1, $2, $3, 'W', 'w', 'w', 1, 'test')`, []any{wsID, orgID, project}},
			{`INSERT INTO workspace_settings_versions (workspace_id, version, tool_version, region, platform, created_by)
				VALUES ($1, 1, '1.10.6', 'us', 'linux_amd64', 'test')`, []any{wsID}},
		} {
			if _, err := tx.Exec(st.sql, st.args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSuspensionsAreVersionedIdempotentAndKeepHistory(t *testing.T) {
	t.Parallel()
	svc, conn := newService(t)
	ctx := context.Background()
	const org, ws = "org_aaaaaaaaaaaaaaaaaaaaaaaaaa", "ws_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	seedTenant(t, conn, org, ws)
	open := launch.Default()
	open.PublicGate = true
	if _, _, err := svc.Apply(ctx, launch.Change{Actor: "ops", RequestID: "r", IdempotencyKey: "open", Reason: "open", Document: open}); err != nil {
		t.Fatal(err)
	}
	subject := launch.Subject{OrganizationID: org, WorkspaceID: ws}
	suspend := launch.SuspensionChange{Actor: "ops", RequestID: "req_1", IdempotencyKey: "s-1", OrganizationID: org,
		WorkspaceID: ws, ExpectedVersion: 0, Reason: "abuse report #4411"}
	first, replayed, err := svc.Suspend(ctx, suspend)
	if err != nil || replayed || first.Version != 1 || !first.Suspended || first.SuspendedBefore {
		t.Fatalf("suspend = %+v %v %v", first, replayed, err)
	}
	if d := svc.Decide(ctx, nil, subject); d.Admitted || d.Reason != "suspended" {
		t.Fatalf("suspended workspace admitted: %+v", d)
	}
	if d := svc.DecideBy(ctx, nil, subject, launch.AdmitAccess); !d.Admitted {
		t.Fatalf("a suspension closed the gate for reads: %+v", d)
	}
	// Another workspace of the organization is not suspended.
	if d := svc.Decide(ctx, nil, launch.Subject{OrganizationID: org, WorkspaceID: "ws_bbbbbbbbbbbbbbbbbbbbbbbbbb"}); !d.Admitted {
		t.Fatalf("suspension leaked to another workspace: %+v", d)
	}
	// The same key and change replays the first answer.
	again, replayed, err := svc.Suspend(ctx, suspend)
	if err != nil || !replayed || again != first {
		t.Fatalf("replay = %+v %v %v", again, replayed, err)
	}
	// The key with another change conflicts, whatever changed.
	for name, changed := range map[string]launch.SuspensionChange{
		"reason":    func() launch.SuspensionChange { c := suspend; c.Reason = "other"; return c }(),
		"workspace": func() launch.SuspensionChange { c := suspend; c.WorkspaceID = ""; return c }(),
		"version":   func() launch.SuspensionChange { c := suspend; c.ExpectedVersion = 1; return c }(),
	} {
		if _, _, err := svc.Suspend(ctx, changed); !errors.Is(err, launch.ErrKeyReused) {
			t.Errorf("%s changed under the key: %v", name, err)
		}
	}
	lift := suspend
	lift.IdempotencyKey = "s-1" // a lift under the suspension's key is another change
	if _, _, err := svc.Lift(ctx, lift); !errors.Is(err, launch.ErrKeyReused) {
		t.Fatalf("lift under the suspend key = %v", err)
	}
	// A stale expected version is refused, and so is a change to the state
	// the subject is already in.
	lift.IdempotencyKey, lift.ExpectedVersion, lift.Reason = "l-1", 0, "resolved"
	if _, _, err := svc.Lift(ctx, lift); !errors.Is(err, launch.ErrSuspensionVersionConflict) {
		t.Fatalf("stale lift = %v", err)
	}
	twice := suspend
	twice.IdempotencyKey, twice.ExpectedVersion = "s-2", 1
	if _, _, err := svc.Suspend(ctx, twice); !errors.Is(err, launch.ErrSuspensionUnchanged) {
		t.Fatalf("second suspend = %v", err)
	}
	lift.ExpectedVersion = 1
	lifted, _, err := svc.Lift(ctx, lift)
	if err != nil || lifted.Version != 2 || lifted.Suspended || !lifted.SuspendedBefore {
		t.Fatalf("lift = %+v %v", lifted, err)
	}
	if d := svc.Decide(ctx, nil, subject); !d.Admitted {
		t.Fatalf("lifted workspace refused: %+v", d)
	}
	// Deleting the workspace keeps its history; the history is immutable.
	if err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) error {
		if _, err := tx.Exec(`DELETE FROM workspace_settings_versions WHERE workspace_id = $1`, ws); err != nil {
			return err
		}
		_, err := tx.Exec(`DELETE FROM workspaces WHERE id = $1`, ws)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	state, err := svc.Suspensions(ctx, org, ws)
	if err != nil || state.Version != 2 || state.Suspended || len(state.Changes) != 2 || state.Changes[1].Reason != "abuse report #4411" {
		t.Fatalf("history after deletion = %+v %v", state, err)
	}
	if _, err := conn.Exec(`UPDATE suspension_changes SET reason = 'rewritten'`); err == nil {
		t.Fatal("a suspension change was edited in place")
	}
	// A deleted workspace cannot be suspended again.
	twice.IdempotencyKey, twice.ExpectedVersion = "s-3", 2
	if _, _, err := svc.Suspend(ctx, twice); !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("suspending a deleted workspace = %v", err)
	}
	// The tenant's audit events say what happened, never why.
	var evidence []string
	if err := conn.Select(&evidence, `SELECT evidence::text FROM audit_events WHERE organization_id = $1 ORDER BY created_at`, org); err != nil {
		t.Fatal(err)
	}
	if len(evidence) != 2 {
		t.Fatalf("audit events %v", evidence)
	}
	for _, e := range evidence {
		if strings.Contains(e, "abuse") || strings.Contains(e, "resolved") || strings.Contains(e, "reason") {
			t.Fatalf("operator reason in the tenant's evidence: %s", e)
		}
	}
}

func TestCapacityLeasesAreBoundedPerRegionAndHeldOncePerHolder(t *testing.T) {
	t.Parallel()
	svc, conn := newService(t)
	ctx := context.Background()
	c := launch.Default()
	c.Ceilings.SandboxesPerRegion["us"] = 1
	if _, _, err := svc.Apply(ctx, launch.Change{Actor: "ops", RequestID: "r", IdempotencyKey: "one", Reason: "one slot", Document: c}); err != nil {
		t.Fatal(err)
	}
	const org, ws = "org_aaaaaaaaaaaaaaaaaaaaaaaaaa", "ws_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	seedTenant(t, conn, org, ws)
	for n, v := range []string{"pol_v1", "pol_v2"} {
		if _, err := conn.Exec(`INSERT INTO policy_sets (id, organization_id, name, created_by_kind, created_by_id) VALUES ('pol_set', $1, 's', 'user', 'u')
			ON CONFLICT DO NOTHING`, org); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(`INSERT INTO policy_versions (id, organization_id, policy_set_id, number, workspace_id, settings_version,
			tool_version, region, source_identity, source_sha256, source_size, engine_version, capabilities_id, capabilities_sha256,
			entrypoint, created_by_kind, created_by_id) VALUES ($1, $2, 'pol_set', $3, $4, 1, '1.10.6', 'us', 'x', '\x00', 1, '1.18.2',
			'c', 'c', 'e', 'user', 'u')`, v, org, n+1, ws); err != nil {
			t.Fatal(err)
		}
	}
	take := func(h launch.LeaseHolder) bool {
		t.Helper()
		var granted bool
		if err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) error {
			var err error
			granted, err = svc.TakeLease(ctx, tx, "us", h)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return granted
	}
	first, second := launch.LeaseHolder{PolicyVersionID: "pol_v1"}, launch.LeaseHolder{PolicyVersionID: "pol_v2"}
	if !take(first) || !take(first) {
		t.Fatal("the first build got no lease, or lost it on replay")
	}
	if take(second) {
		t.Fatal("a second lease exceeded the regional ceiling of 1")
	}
	var n int
	if err := conn.Get(&n, `SELECT count(*) FROM capacity_leases`); err != nil || n != 1 {
		t.Fatalf("%d leases (%v), want 1: a replay reserved twice", n, err)
	}
	if err := launch.ReleaseLease(ctx, conn, first); err != nil {
		t.Fatal(err)
	}
	if !take(second) {
		t.Fatal("the released slot was not granted")
	}
	if err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) error {
		_, err := svc.TakeLease(ctx, tx, "us", launch.LeaseHolder{AttemptID: "att_x", PolicyVersionID: "pol_v1"})
		return err
	}); err == nil {
		t.Fatal("a lease with two holders was granted")
	}
}
