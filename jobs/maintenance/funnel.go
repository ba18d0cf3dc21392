package maintenance

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/riverqueue/river"

	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/telemetry"
)

// FunnelInterval is how often the launch funnel reads the audit trail.
const FunnelInterval = time.Minute

// FunnelLag is how old an audit event must be before the funnel reads it:
// an event carries the time it was appended, not the time its transaction
// committed, so the newest events could still be overtaken by a slower
// transaction's older ones that the cursor would then have passed.
const FunnelLag = 30 * time.Second

const funnelBatch = 1000

// funnelSteps maps the audit actions that are launch funnel steps to their
// step. A finished apply counts only when it applied.
var funnelSteps = map[string]string{
	"organization.created":          telemetry.StepOrganizationCreated,
	"workspace.created":             telemetry.StepWorkspaceCreated,
	"github_installation.connected": telemetry.StepCodeHostConnected,
	"run.created":                   telemetry.StepRunCreated,
	"run.apply_finished":            telemetry.StepApplySucceeded,
}

// LaunchFunnelArgs schedules one pass of the launch funnel.
type LaunchFunnelArgs struct{}

// Kind implements river.JobArgs.
func (LaunchFunnelArgs) Kind() string { return "launch_funnel" }

// InsertOpts keeps one pass per period however many workers enqueue it.
func (LaunchFunnelArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByPeriod: FunnelInterval}}
}

// LaunchFunnelWorker emits the launch funnel's product analytics.
type LaunchFunnelWorker struct {
	river.WorkerDefaults[LaunchFunnelArgs]
	DB     *sqlx.DB
	Logger *slog.Logger
}

// Work implements river.Worker.
func (w *LaunchFunnelWorker) Work(ctx context.Context, _ *river.Job[LaunchFunnelArgs]) error {
	for {
		n, err := EmitLaunchFunnel(ctx, w.DB, w.Logger, time.Now().Add(-FunnelLag))
		if err != nil || n < funnelBatch {
			return err
		}
	}
}

// EmitLaunchFunnel emits, through the telemetry boundary, the funnel step
// of each step audit event appended after the cursor and before until, in
// their order, and moves the cursor past them, under the cursor's lock. It
// reports how many events it read. Emission is at least once: a pass whose
// commit fails emits its steps again on the next.
func EmitLaunchFunnel(ctx context.Context, conn *sqlx.DB, logger *slog.Logger, until time.Time) (int, error) {
	var read int
	err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) error {
		var cursor struct {
			CreatedAt time.Time `db:"created_at"`
			EventID   string    `db:"event_id"`
		}
		if err := sqlx.GetContext(ctx, tx, &cursor, `SELECT created_at, event_id FROM launch_funnel_cursor FOR UPDATE`); err != nil {
			return fmt.Errorf("reading the launch funnel cursor: %w", err)
		}
		var events []struct {
			ID             string    `db:"id"`
			OrganizationID string    `db:"organization_id"`
			Action         string    `db:"action"`
			Applied        bool      `db:"applied"`
			CreatedAt      time.Time `db:"created_at"`
		}
		// The action list is the partial index's predicate, so the read
		// uses it.
		if err := sqlx.SelectContext(ctx, tx, &events, `SELECT id, organization_id, action, created_at,
				coalesce(evidence->>'status' = 'applied', false) AS applied
			FROM audit_events
			WHERE action IN ('organization.created', 'workspace.created', 'github_installation.connected', 'run.created',
				'run.apply_finished')
				AND (created_at, id) > ($1, $2) AND created_at < $3
			ORDER BY created_at, id LIMIT $4`, cursor.CreatedAt, cursor.EventID, until, funnelBatch); err != nil {
			return fmt.Errorf("reading launch funnel steps: %w", err)
		}
		read = len(events)
		if read == 0 {
			return nil
		}
		for _, e := range events {
			if e.Action == "run.apply_finished" && !e.Applied {
				continue
			}
			// A step the boundary refuses is dropped, and only its
			// rejection is logged.
			_ = telemetry.Emit(ctx, logger, telemetry.FunnelEvent(funnelSteps[e.Action], e.OrganizationID))
		}
		last := events[len(events)-1]
		if _, err := tx.ExecContext(ctx, `UPDATE launch_funnel_cursor SET created_at = $1, event_id = $2`,
			last.CreatedAt, last.ID); err != nil {
			return fmt.Errorf("moving the launch funnel cursor: %w", err)
		}
		return nil
	})
	return read, err
}
