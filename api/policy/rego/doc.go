// Package rego is what every Cairn process knows about policies without
// linking OPA: the identities a policy version and an evaluation record
// (EngineVersion, Entrypoint, CapabilitiesID and the manifest's committed
// digest, CapabilitiesDigest), the bounds on source, input and decision,
// the safe failure codes (BuildError, EvalError, CodeOf), the input built
// from a plan and checked (BuildInput, CheckInput, CheckSecrets), and the
// one set of rules a decision must obey (DecisionFromJSON). The engine
// itself, OPA 1.18.2 compiling and evaluating Rego v1, is package
// rego/engine, which only the sandboxed policy program (cairn-policy),
// tests and benchmarks link: cairn-api and cairn-worker stay small. The
// package fails closed: an input that cannot be trusted or a decision
// that cannot be read never reads as a pass.
package rego
