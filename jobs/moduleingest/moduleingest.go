package moduleingest

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/cairnhq/cairn/api/registry"
)

// Worker runs one module ingestion. The ingestion row is the fence: a job
// for a settled ingestion returns at once, so a retried or duplicated job
// never publishes twice.
type Worker struct {
	river.WorkerDefaults[registry.IngestArgs]
	CodeHost *registry.CodeHost
}

// Timeout bounds one ingestion: provider reads, a 100 MB archive and its
// publication.
func (w *Worker) Timeout(*river.Job[registry.IngestArgs]) time.Duration { return 10 * time.Minute }

// Work ingests; an error is retried with River's backoff.
func (w *Worker) Work(ctx context.Context, job *river.Job[registry.IngestArgs]) error {
	return w.CodeHost.Ingest(ctx, job.Args.IngestionID)
}
