package worker

import (
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"

	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/jobs/maintenance"
)

// New builds the River client of cairn-worker with every worker and periodic
// job registered. The database/sql driver has no LISTEN/NOTIFY, so the client
// polls every cfg.WorkerPollInterval.
func New(cfg config.Config, conn *sqlx.DB, logger *slog.Logger) (*river.Client[*sql.Tx], error) {
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &maintenance.IdempotencySweepWorker{DB: conn, Logger: logger}); err != nil {
		return nil, fmt.Errorf("registering workers: %w", err)
	}
	if err := river.AddWorkerSafely(workers, &maintenance.SignInFailureSweepWorker{DB: conn}); err != nil {
		return nil, fmt.Errorf("registering workers: %w", err)
	}
	client, err := river.NewClient(riverdatabasesql.New(conn.DB), &river.Config{
		Logger:            logger,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 20}},
		Workers:           workers,
		FetchPollInterval: cfg.WorkerPollInterval,
		FetchCooldown:     min(cfg.WorkerPollInterval, 100*time.Millisecond),
		PeriodicJobs: []*river.PeriodicJob{
			river.NewPeriodicJob(river.PeriodicInterval(time.Hour),
				func() (river.JobArgs, *river.InsertOpts) { return maintenance.IdempotencySweepArgs{}, nil },
				&river.PeriodicJobOpts{RunOnStart: true, ID: "idempotency_sweep"}),
			river.NewPeriodicJob(river.PeriodicInterval(time.Hour),
				func() (river.JobArgs, *river.InsertOpts) { return maintenance.SignInFailureSweepArgs{}, nil },
				&river.PeriodicJobOpts{RunOnStart: true, ID: "sign_in_failure_sweep"}),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating river client: %w", err)
	}
	return client, nil
}
