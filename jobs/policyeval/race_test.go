//go:build race

package policyeval_test

// Under the race detector the evaluation program (this race-instrumented
// test binary) needs more memory before it allocates anything, and its
// detector's own allocator may fail at the ceiling before the Go
// runtime's does, exiting with a message of its own.
const (
	raceMemory  = 768 << 20
	raceEnabled = true
)
