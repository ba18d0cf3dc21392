package worker

import (
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/jobs/runner"
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

// A SIGKILLed worker's running jobs are released by River's rescuer. By
// default it must never take back a phase job that can still be running
// (a phase up to its timeout, then the interrupt grace and the evidence
// window); a short setting, as the crash drills use, shortens the timeout
// of jobs without their own so River accepts it.
func TestRescueOutlastsTheLongestPhase(t *testing.T) {
	t.Parallel()
	cfg := config.Config{PhaseTimeout: 3 * time.Hour, ApplyInterruptGrace: 2 * time.Minute}
	rescue, timeout := RescueAfter(cfg)
	if longest := cfg.PhaseTimeout + cfg.ApplyInterruptGrace + runner.EvidenceWindow; rescue <= longest || timeout != time.Minute {
		t.Errorf("default rescue %s (job timeout %s) for phases lasting up to %s", rescue, timeout, longest)
	}
	cfg = config.Config{PhaseTimeout: time.Minute, ApplyInterruptGrace: time.Second}
	if rescue, _ := RescueAfter(cfg); rescue < time.Hour {
		t.Errorf("default rescue %s is shorter than River's own hour", rescue)
	}
	cfg.JobRescueAfter = 15 * time.Second
	if rescue, timeout := RescueAfter(cfg); rescue != 15*time.Second || timeout != 15*time.Second {
		t.Errorf("configured rescue: %s, job timeout %s", rescue, timeout)
	}
}
