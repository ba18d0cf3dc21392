// Package policyeval runs each policy evaluation in its own sandboxed
// process, so no policy can stall or exhaust the worker: a built-in call
// that loops (strings.render_template over a huge range) or a comprehension
// that allocates without end is stopped by the process's wall clock,
// CPU-time and memory ceilings, and becomes outcome error for that
// evaluation alone. The child (cairn-policy evaluate, jobs/policyprogram)
// receives only the sanitized input and a grant to fetch its one bundle
// from cairn-api over HTTPS; it never sees the database, keys, run token,
// plan, state or configuration. Evaluator is the worker's side: it bounds
// how many children run at once, how much it reads back, and maps every way
// a child can end to a safe error code. The worker validates the decision
// again before it counts.
package policyeval
