package notify

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// JobInsertTopic is the topic River's inserts notify on, on the channel
// "<schema>.river_insert"; a worker's producer fetches when it hears its
// queue named.
const JobInsertTopic = "river_insert"

// JobInsertPayload is the payload of a job insert notification for queue,
// written exactly as River writes its own so that PostgreSQL, which
// delivers identical notifications of one transaction once, merges the two.
func JobInsertPayload(queue string) string { return fmt.Sprintf("{\"queue\": %q}", queue) }

// JobInserter inserts a job in the caller's transaction: River's client.
type JobInserter interface {
	InsertTx(ctx context.Context, tx *sql.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// AnnouncingInserter announces every job it inserts that can start now.
// River's own notification is rate-limited per queue and process: a job
// inserted within the limiter's cooldown of another goes unannounced, and
// if its transaction commits after the worker's notified fetch it would
// wait for the worker's next poll, which is a minute away on an idle
// worker. The extra NOTIFY costs one statement per job.
type AnnouncingInserter struct {
	Jobs JobInserter
}

func (a AnnouncingInserter) InsertTx(ctx context.Context, tx *sql.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error) {
	res, err := a.Jobs.InsertTx(ctx, tx, args, opts)
	if err != nil || res == nil || res.Job == nil || res.UniqueSkippedAsDuplicate || res.Job.State != rivertype.JobStateAvailable {
		// A scheduled job is announced by River's scheduler when it falls
		// due; a duplicate was announced when it was inserted.
		return res, err
	}
	// The channel is named as River names it: the connection's schema.
	if _, err := tx.ExecContext(ctx, `SELECT pg_notify(current_schema() || '.' || $1, $2)`,
		JobInsertTopic, JobInsertPayload(res.Job.Queue)); err != nil {
		return nil, fmt.Errorf("announcing job %d: %w", res.Job.ID, err)
	}
	return res, nil
}
