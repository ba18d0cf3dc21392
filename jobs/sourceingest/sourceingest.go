package sourceingest

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/cairnhq/cairn/api/github"
)

// Worker runs one source ingestion. The ingestion row is the fence: a job
// for a settled ingestion returns at once, so a retried or duplicated job
// can never create a second run.
type Worker struct {
	river.WorkerDefaults[github.IngestArgs]
	GitHub *github.Service
}

// Timeout bounds one ingestion: provider reads and a 100 MB archive.
func (w *Worker) Timeout(*river.Job[github.IngestArgs]) time.Duration { return 10 * time.Minute }

// Work ingests; an error is retried with River's backoff.
func (w *Worker) Work(ctx context.Context, job *river.Job[github.IngestArgs]) error {
	return w.GitHub.Ingest(ctx, job.Args.IngestionID)
}
