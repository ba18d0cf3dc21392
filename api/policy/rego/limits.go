package rego

import "time"

// Build limits. The source limits keep a hostile archive from turning the
// compiler into a memory sink; the output limits are the contract's. They
// live here, not with the builder, because the API and the worker bound
// what they store and stream by them.
const (
	MaxModules          = 1000
	MaxSourceBytes      = 16 << 20
	MaxTestResultsBytes = 2 << 20
	MaxBundleBytes      = 100_000_000
	// TestTimeout bounds each test rule; the whole build is bounded by the
	// caller's context.
	TestTimeout = 10 * time.Second
)
