// Package inprocess evaluates policies in the calling process, with the
// engine (api/policy/rego/engine) linked in: the baseline of the policy
// benchmark and the evaluator of tests that need real decisions without
// sandboxes. Nothing bounds an evaluation's memory here, and a long
// built-in call outlives its timeout, so no Cairn process serves runs with
// it: a worker runs each evaluation in a sandboxed cairn-policy process
// (jobs/policyeval), and neither cairn-api nor cairn-worker links OPA.
package inprocess
