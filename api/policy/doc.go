// Package policy is policy as code: named sets of Rego, numbered immutable
// versions built once in a sandbox and published only when the committed
// digests of their source, bundle and test results agree with the build's
// completion; attachments that put a published version in force at an
// organization, project or workspace scope with an enforcement mode; the
// snapshot of a workspace's effective attachments taken when a run is
// created; and the evaluation of a run's sanitized plan against that
// snapshot, persisted as results bound by digest to everything they used.
// Evaluations run through an Evaluator (in production one sandboxed process
// each, jobs/policyeval), which fetches each bundle with an attempt-bound
// grant signed and checked here; every decision an evaluator returns is
// validated here again before it counts.
// Overrides of soft failures are recorded here and applied to runs by the
// run package, which owns the run's status.
package policy
