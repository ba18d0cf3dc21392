// Package engine is Cairn's embedded policy engine: OPA 1.18.2 linked as a
// library, Rego v1 only, compiled against the committed capabilities
// manifest (contracts/policy), which admits only deterministic,
// side-effect-free built-ins. A policy set is built once (Build: parse,
// strict compile, run its tests, write a bundle and a test results
// document) and evaluated many times (Load or Cache, then Evaluate) against
// one sanitized input (ParseInput, or InputValue for a document already
// checked). Its verdicts are package rego's typed errors and its decisions
// pass rego.DecisionFromJSON, the rules every process applies. Only the
// sandboxed policy program (jobs/cmd/cairn-policy), tests and benchmarks
// import it: OPA is most of a binary's size, and the API and the worker,
// which never run a policy themselves, should not map it.
package engine
