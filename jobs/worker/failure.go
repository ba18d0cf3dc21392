package worker

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"regexp"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/cairnhq/cairn/api/platform/failure"
)

// failureMiddleware is the innermost worker middleware. A job that panics
// or fails is reported the one way SPEC §6 allows: its classification
// beside the job's kind and ID (and its run's ID, when it has one). River
// logs a failed job's error and keeps it in the job's row, and logs a
// panic's value; so neither ever reaches River: a panic becomes, and an
// error is replaced by, one whose text is fixed. The cause stays reachable
// through errors.Is and errors.As, never through its text.
type failureMiddleware struct {
	river.MiddlewareDefaults
	logger *slog.Logger
}

func (m *failureMiddleware) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			m.report(ctx, job, p)
			err = &jobFailure{classification: failure.Classify(p)}
		}
	}()
	err = doInner(ctx)
	var snooze *rivertype.JobSnoozeError
	if err == nil || errors.As(err, &snooze) {
		return err
	}
	m.report(ctx, job, err)
	failed := &jobFailure{classification: failure.Classify(err), cause: err}
	var cancel *rivertype.JobCancelError
	if errors.As(err, &cancel) {
		return river.JobCancel(failed)
	}
	return failed
}

// runIDPattern is a run's opaque ID, the one job argument a report names.
var runIDPattern = regexp.MustCompile(`^run_[a-z2-7]{26}$`)

func (m *failureMiddleware) report(ctx context.Context, job *rivertype.JobRow, v any) {
	ids := []slog.Attr{slog.String("job_kind", job.Kind), slog.Int64("job_id", job.ID), slog.Int("job_attempt", job.Attempt)}
	var args struct {
		RunID string `json:"run_id"`
	}
	if json.Unmarshal(job.EncodedArgs, &args) == nil && runIDPattern.MatchString(args.RunID) {
		ids = append(ids, slog.String("run_id", args.RunID))
	}
	failure.Report(ctx, m.logger, v, ids...)
}

// jobFailure is what River sees of a failed job: a fixed text naming the
// classification only.
type jobFailure struct {
	classification string
	cause          error
}

func (e *jobFailure) Error() string { return "job failed (" + e.classification + ")" }

func (e *jobFailure) Unwrap() error { return e.cause }
