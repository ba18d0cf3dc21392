// Package trigger is run triggers: a workspace (the destination) subscribes
// to another (the source), and every run of the source that applies gives
// the destination exactly one new plan_and_apply run of its current
// configuration, which waits for a person's approval like every run.
// Subscriptions are refused when they would name the workspace itself, a
// 21st source, an existing pair or a cycle (checked under the
// organization's advisory lock). The fan-out is a River job inserted in the
// transaction that makes the source run applied (api/run); Fire is what
// jobs/runtrigger runs for it.
package trigger
