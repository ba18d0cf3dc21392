// Package policyprogram is the policy program, cairn-policy: the one
// process that links the policy engine (api/policy/rego/engine, OPA). A
// worker runs it in a fresh sandbox for each policy build (Build: compile,
// test and bundle a set's sources into files the worker stores) and each
// evaluation (Evaluate: fetch one bundle through its grant, evaluate the
// sanitized input, write one response). It gets no configuration,
// database, keys or secrets; the worker trusts nothing it writes until it
// has checked it again (jobs/policybuild, jobs/policyeval).
package policyprogram
