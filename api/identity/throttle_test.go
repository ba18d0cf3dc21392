package identity

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestThrottleDelaysGrowAndDrain(t *testing.T) {
	t.Parallel()
	p := throttlePolicy{kind: "t", free: 5, base: time.Second, max: 15 * time.Minute, drain: time.Hour}
	for _, tc := range []struct {
		level float64
		want  time.Duration
	}{
		{0, 0}, {4, 0}, {4.49, 0}, {4.5, 707106781}, {4.9999, 999930687}, {5, time.Second}, {6, 2 * time.Second}, {7, 4 * time.Second},
		{5.5, 1414213562}, {14, 512 * time.Second}, {15, 15 * time.Minute}, {1e6, 15 * time.Minute},
	} {
		if got := p.delay(tc.level); got != tc.want {
			t.Errorf("delay(%v) = %v, want %v", tc.level, got, tc.want)
		}
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := throttleState{Level: 5, UpdatedAt: t0}
	if w := p.wait(st, t0.Add(300*time.Millisecond)); w != 700*time.Millisecond {
		t.Errorf("wait = %v, want the rest of the second", w)
	}
	if w := p.wait(st, t0.Add(2*time.Second)); w != 0 {
		t.Errorf("wait after the delay = %v", w)
	}
	// Counting drains first: two hours later five attempts are three.
	next := p.counted(st, t0.Add(2*time.Hour))
	if next.Level != 4 || !next.UpdatedAt.Equal(t0.Add(2*time.Hour)) {
		t.Errorf("counted = %+v", next)
	}
	if drained := p.counted(st, t0.Add(100*time.Hour)); drained.Level != 1 {
		t.Errorf("a drained subject starts at %v", drained.Level)
	}
	// A clock that went backwards neither drains nor adds.
	if back := p.counted(st, t0.Add(-time.Hour)); back.Level != 6 {
		t.Errorf("counted with a clock step back = %v", back.Level)
	}
}

// TestHashGateRefusesWhenTheBudgetIsTaken holds the whole budget and checks
// that a hash waits only briefly, that a hash larger than the budget waits
// for all of it rather than forever, and that a caller who gave up is told
// so rather than "busy".
func TestHashGateRefusesWhenTheBudgetIsTaken(t *testing.T) {
	t.Parallel()
	g := newHashGate(1024, 50*time.Millisecond)
	holding, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		done <- g.run(context.Background(), 1024, func() { close(holding); <-release })
	}()
	<-holding
	started := time.Now()
	ran := false
	if err := g.run(context.Background(), 64, func() { ran = true }); !errors.Is(err, ErrBusy) || ran {
		t.Fatalf("second hash while full = %v (ran %v)", err, ran)
	}
	if waited := time.Since(started); waited < 50*time.Millisecond || waited > 2*time.Second {
		t.Fatalf("waited %v for a slot, want about 50ms", waited)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.run(canceled, 64, func() {}); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled caller = %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := g.run(context.Background(), 1<<20, func() { ran = true }); err != nil || !ran {
		t.Fatalf("a hash over the whole budget = %v (ran %v)", err, ran)
	}
}

// TestHashGateWithoutWaitRunsWhenFree: CAIRN_ARGON2_WAIT=0 means "never
// wait for a share", not "never hash": a free budget runs the hash at once,
// a taken one is busy at once.
func TestHashGateWithoutWaitRunsWhenFree(t *testing.T) {
	t.Parallel()
	g := newHashGate(1024, 0)
	ran := false
	if err := g.run(context.Background(), 64, func() { ran = true }); err != nil || !ran {
		t.Fatalf("a hash with the budget free = %v (ran %v)", err, ran)
	}
	holding, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		done <- g.run(context.Background(), 1024, func() { close(holding); <-release })
	}()
	<-holding
	ran = false
	if err := g.run(context.Background(), 64, func() { ran = true }); !errors.Is(err, ErrBusy) || ran {
		t.Fatalf("a hash with the budget taken = %v (ran %v)", err, ran)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
