package worker

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"

	"github.com/cairnhq/cairn/api/platform/notify"
)

// riverSchedulerInterval is how often River's scheduler (on the elected
// leader) makes due scheduled and retryable jobs available, notifying
// their queues. A job snoozed or failed for at most this long skips the
// scheduler: River makes it available at once with a start time in the
// future, and nothing announces it when that time comes.
const riverSchedulerInterval = 5 * time.Second

// retryGrace is how long past a retry's start time its queue keeps being
// woken: River records the snooze or failure asynchronously (its
// completer batches), and another worker may have taken the job first.
const retryGrace = 2 * time.Second

// queueWakes are insert notifications a worker hands its own producers
// besides those PostgreSQL delivers. An idle worker polls once a minute;
// everything that can start sooner is announced: inserts by their NOTIFY,
// every queue after the listener reconnects (notifications sent meanwhile
// are lost), and a job this worker snoozed or failed for a few seconds by
// waking its queue every retryPoll until it is due (see expectRetry). So
// an idle worker runs no query, and one with retries pending polls only
// their queues.
type queueWakes struct {
	queues    []string
	retryPoll time.Duration
	// kick tells a listener waiting for a notification that one is
	// pending; it holds one signal, enough to wake the single waiter.
	kick chan struct{}

	mu      sync.Mutex
	pending []string
	// retrying is, per queue with a retry to come, the time until which
	// it is woken; its timer runs while the entry exists.
	retrying map[string]time.Time
}

func newQueueWakes(queues []string, retryPoll time.Duration) *queueWakes {
	return &queueWakes{queues: queues, retryPoll: retryPoll, kick: make(chan struct{}, 1), retrying: map[string]time.Time{}}
}

// wake queues an insert notification for each queue not already waiting
// for one: one fetch serves any number of wakes, and a listener that is
// not being read cannot pile them up.
func (w *queueWakes) wake(queues ...string) {
	w.mu.Lock()
	for _, q := range queues {
		if !slices.Contains(w.pending, q) {
			w.pending = append(w.pending, q)
		}
	}
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// wakeAll wakes every queue the worker serves.
func (w *queueWakes) wakeAll() { w.wake(w.queues...) }

// next is the next pending notification, or nil.
func (w *queueWakes) next() *riverdriver.Notification {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pending) == 0 {
		return nil
	}
	queue := w.pending[0]
	w.pending = w.pending[1:]
	return &riverdriver.Notification{Topic: notify.JobInsertTopic, Payload: notify.JobInsertPayload(queue)}
}

// expectRetry wakes queue every retryPoll until due has passed by
// retryGrace. Retries due later are announced by River's scheduler.
func (w *queueWakes) expectRetry(queue string, due time.Time) {
	if time.Until(due) > riverSchedulerInterval {
		return
	}
	until := due.Add(retryGrace)
	w.mu.Lock()
	defer w.mu.Unlock()
	current, running := w.retrying[queue]
	if until.After(current) {
		w.retrying[queue] = until
	}
	if !running {
		time.AfterFunc(w.retryPoll, func() { w.pollRetries(queue) })
	}
}

// pollRetries wakes queue and comes back after retryPoll, until its
// window ends.
func (w *queueWakes) pollRetries(queue string) {
	w.mu.Lock()
	if time.Now().After(w.retrying[queue]) {
		delete(w.retrying, queue)
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	w.wake(queue)
	time.AfterFunc(w.retryPoll, func() { w.pollRetries(queue) })
}

// retryWakeMiddleware tells wakes about every job that ends to be retried
// soon: snoozed, or failed with attempts left (River's first retry comes
// a second later). It sits outside failureMiddleware, which turns panics
// into errors.
type retryWakeMiddleware struct {
	river.MiddlewareDefaults
	wakes *queueWakes
}

func (m *retryWakeMiddleware) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	err := doInner(ctx)
	if err == nil {
		return nil
	}
	var snooze *rivertype.JobSnoozeError
	var cancel *rivertype.JobCancelError
	switch {
	case errors.As(err, &snooze):
		m.wakes.expectRetry(job.Queue, time.Now().Add(snooze.Duration))
	case errors.As(err, &cancel), job.Attempt >= job.MaxAttempts:
	default:
		// The retry's time is River's retry policy's; any due within
		// the scheduler's interval is covered by waking until its end.
		m.wakes.expectRetry(job.Queue, time.Now().Add(riverSchedulerInterval))
	}
	return err
}
