package maintenance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/platform/dbtest"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/platform/telemetry"
	"github.com/cairnhq/cairn/jobs/maintenance"
)

// TestLaunchFunnelEmitsOnlyItsSteps: the launch funnel (SPEC §6 product
// analytics) emits one launch_funnel event per step audit event — each
// carrying only the step and the organization's opaque ID, never the
// evidence's names, slugs or e-mail addresses — skips every other action
// and applies that did not apply, waits for events younger than its lag,
// and never emits an event twice. An organization ID that is not opaque
// is refused at the boundary.
func TestLaunchFunnelEmitsOnlyItsSteps(t *testing.T) {
	t.Parallel()
	conn := dbtest.New(t)
	org, other := id.New("org"), id.New("org")
	now := time.Now()
	// The cursor starts where migration 00054 ran, which for a database
	// cloned from the test template can be after the backdated events
	// below: start it before them, as on a deployment older than they are.
	if _, err := conn.Exec(`UPDATE launch_funnel_cursor SET created_at = $1, event_id = ''`, now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	insert := func(org, action, evidence string, at time.Time) {
		t.Helper()
		if _, err := conn.Exec(`INSERT INTO audit_events (id, organization_id, action, actor_type, actor_id, evidence, created_at)
			VALUES ($1, $2, $3, 'user', 'usr_x', $4, $5)`, id.New("aud"), org, action, evidence, at); err != nil {
			t.Fatal(err)
		}
	}
	insert(org, "organization.created", `{"slug": "acme-secret-project"}`, now.Add(-5*time.Minute))
	insert(org, "member.invited", `{"email": "alice@example.com"}`, now.Add(-4*time.Minute))
	insert(org, "workspace.created", `{"name": "prod-payments", "cloud_name": "arn:aws:iam::123456789012:role/x"}`, now.Add(-4*time.Minute))
	insert(org, "github_installation.connected", `{"account_login": "acme"}`, now.Add(-3*time.Minute))
	insert(org, "run.created", `{"message": "aws_instance.web[0]"}`, now.Add(-2*time.Minute))
	insert(org, "run.apply_finished", `{"status": "errored"}`, now.Add(-2*time.Minute))
	insert(other, "run.apply_finished", `{"status": "applied"}`, now.Add(-time.Minute))
	insert("acme", "workspace.created", `{}`, now.Add(-time.Minute)) // not an opaque ID
	insert(org, "run.created", `{}`, now)                            // younger than the lag

	var out bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&out, nil))
	ctx := context.Background()
	read, err := maintenance.EmitLaunchFunnel(ctx, conn, logger, now.Add(-maintenance.FunnelLag))
	if err != nil {
		t.Fatal(err)
	}
	if read != 7 {
		t.Fatalf("read %d step events, want 7", read)
	}
	type line struct {
		Msg    string `json:"msg"`
		Event  string `json:"event"`
		Step   string `json:"step"`
		OrgID  string `json:"organization_id"`
		Reason string `json:"reason"`
	}
	var steps []string
	rejected := 0
	for _, raw := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var l line
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatal(err)
		}
		var fields map[string]any
		_ = json.Unmarshal([]byte(raw), &fields)
		switch {
		case l.Msg == "telemetry event rejected":
			rejected++
		case l.Event == "launch_funnel":
			if len(fields) != 6 { // time, level, msg, event, step, organization_id
				t.Fatalf("a funnel event carries more than its step and organization: %s", raw)
			}
			steps = append(steps, l.OrgID+" "+l.Step)
		default:
			t.Fatalf("unexpected line %s", raw)
		}
	}
	for _, leaked := range []string{"acme-secret-project", "alice@example.com", "prod-payments", "arn:aws", "aws_instance", `"acme"`} {
		if strings.Contains(out.String(), leaked) {
			t.Fatalf("%q crossed the telemetry boundary: %s", leaked, out.String())
		}
	}
	want := []string{org + " " + telemetry.StepOrganizationCreated, org + " " + telemetry.StepWorkspaceCreated,
		org + " " + telemetry.StepCodeHostConnected, org + " " + telemetry.StepRunCreated, other + " " + telemetry.StepApplySucceeded}
	if !slices.Equal(steps, want) || rejected != 1 {
		t.Fatalf("steps %v (%d rejected), want %v and the non-opaque organization rejected", steps, rejected, want)
	}

	// A second pass emits nothing again; once the lag has passed, the
	// young event is emitted.
	out.Reset()
	if read, err := maintenance.EmitLaunchFunnel(ctx, conn, logger, now.Add(-maintenance.FunnelLag)); err != nil || read != 0 || out.Len() != 0 {
		t.Fatalf("second pass: %d read, %v, %s", read, err, out.String())
	}
	if read, err := maintenance.EmitLaunchFunnel(ctx, conn, logger, now.Add(time.Second)); err != nil || read != 1 ||
		!strings.Contains(out.String(), `"step":"run_created"`) {
		t.Fatalf("after the lag: %d read, %v, %s", read, err, out.String())
	}
}
