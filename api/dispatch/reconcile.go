package dispatch

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/platform/db"
)

// Handler visits one due record of its kind in the reconciler's
// transaction: it reads the subject, and either reports it settled or
// redelivers its job (InsertTx with the job's unique options, so a live
// job is found rather than doubled) and says which happened.
type Handler func(ctx context.Context, tx *sqlx.Tx, r Record) (Outcome, error)

// Reconcile runs one tick over the kinds handlers knows: it claims up to
// ReconcileBatch due records for ReconcileClaim in one transaction, hands
// each to its kind's handler, completes the settled ones and backs off the
// others (Backoff of their visits so far).
func Reconcile(ctx context.Context, conn *sqlx.DB, now time.Time, handlers map[string]Handler) (Report, error) {
	kinds := make([]string, 0, len(handlers))
	for k := range handlers {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	var report Report
	err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) error {
		report = Report{}
		due, err := claimDue(ctx, tx, kinds, now, ReconcileBatch)
		if err != nil {
			return err
		}
		report.Claimed = len(due)
		for _, r := range due {
			outcome, err := handlers[r.Kind](ctx, tx, r)
			if err != nil {
				return fmt.Errorf("reconciling %s: %w", r.ID, err)
			}
			switch outcome {
			case Settled, Failed:
				if err := Complete(ctx, tx, r.ID, now); err != nil {
					return err
				}
				if outcome == Failed {
					report.Failed++
				} else {
					report.Closed++
				}
			case Redelivered, Waiting:
				if err := checked(ctx, tx, r, now.Add(ReconcileClaim), now.Add(Backoff(r.Checks+1)), outcome == Redelivered); err != nil {
					return err
				}
				if outcome == Redelivered {
					report.Redelivered++
				} else {
					report.Waiting++
				}
			}
		}
		return nil
	})
	return report, err
}
