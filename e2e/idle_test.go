package e2e

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// idleWindow is how long TestIdleStackIsQuiet watches; CAIRN_E2E_IDLE_WINDOW
// (a Go duration) lengthens it, to the minute the issue names, say.
func idleWindow(t *testing.T) time.Duration {
	if v := os.Getenv("CAIRN_E2E_IDLE_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("CAIRN_E2E_IDLE_WINDOW: %v", err)
		}
		return d
	}
	return 30 * time.Second
}

// cpuTicks is a process's user and system CPU time in clock ticks (fields
// 14 and 15 of /proc/PID/stat, counted after the command name, which may
// hold spaces).
func cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return utime + stime
}

// TestIdleStackIsQuiet: once the four processes have started, a stack
// nobody uses prints nothing at the default log level — River's producer
// counts and maintenance passes, the reaper's periodic job and the like
// are debug — and its worker, woken by notifications rather than a tight
// poll, uses almost no CPU.
func TestIdleStackIsQuiet(t *testing.T) {
	t.Parallel()
	s := StartStack(t)
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(s.Logs(), "cairn-worker started") {
		if time.Now().After(deadline) {
			t.Fatalf("the worker did not start:\n%s", s.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// What start-up runs at once (the periodic jobs that run on start, the
	// launch gate the stack opened) settles first.
	time.Sleep(3 * time.Second)
	quietFrom := len(s.Logs())
	worker := s.PID("worker")
	ticksBefore := cpuTicks(t, worker)
	started := time.Now()
	time.Sleep(idleWindow(t))
	elapsed := time.Since(started)
	cpu := float64(cpuTicks(t, worker)-ticksBefore) / 100 / elapsed.Seconds() * 100 // USER_HZ is 100 on Linux
	if after := strings.TrimSpace(s.Logs()[quietFrom:]); after != "" {
		t.Errorf("the idle stack logged within %s of starting:\n%s", elapsed.Round(time.Second), after)
	}
	t.Logf("idle worker: %.2f %% of a core over %s", cpu, elapsed.Round(time.Second))
	// Polling every 100 ms (each poll a query per queue) cost 1.4–2 %;
	// River's completer, ticking every 50 ms, 0.4 % more than the 0.08 %
	// left now that it stops ticking when idle (third_party/river).
	if cpu > 0.25 {
		t.Errorf("the idle worker used %.2f %% of a core", cpu)
	}
}
