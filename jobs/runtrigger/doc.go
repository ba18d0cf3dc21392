// Package runtrigger runs run-trigger fan-outs: the River job inserted in
// the transaction that makes a run applied, which gives every workspace
// subscribed to the run's workspace one new run. The work itself is
// api/trigger's; this is its worker.
package runtrigger
