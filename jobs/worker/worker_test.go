package worker

import (
	"testing"

	"github.com/cairnhq/cairn/api/launch"
)

// Launch control may route a workflow to any of launch.Queues, so every
// worker must serve each of them.
func TestEveryRoutableQueueIsServed(t *testing.T) {
	t.Parallel()
	for _, q := range launch.Queues {
		if queueWorkers[q] < 1 {
			t.Errorf("queue %q can be routed to but no worker serves it", q)
		}
	}
}
