// Package rego is Cairn's embedded policy engine: OPA 1.18.2 linked as a
// library, Rego v1 only, compiled against the committed capabilities
// manifest (contracts/policy), which admits only deterministic,
// side-effect-free built-ins. A policy set is built once (Build: parse,
// strict compile, run its tests, write a bundle and a test results
// document) and evaluated many times (Load or Cache, then Evaluate) against
// one sanitized input per run (BuildInput from the plan, CheckSecrets,
// ParseInput). Every bound on source, input, evaluation and decision is
// enforced here, and every verdict is a typed error carrying a safe code
// (BuildError, EvalError) whose detail is for operators only: the package
// fails closed, so a policy that cannot be compiled, an input that cannot
// be trusted or a decision that cannot be read never reads as a pass.
package rego
