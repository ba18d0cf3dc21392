// Package failure reports unhandled failures — a recovered panic, an error
// nothing mapped to an answer — the one way SPEC §6 allows: a fixed
// classification, error or non_error, beside opaque identifiers (the
// request ID, a job's kind and IDs). The panic value, the error's text and
// the stack are never logged: any of them can carry a caller's input or a
// secret. It holds the net/http recovery handler of the dashboard, the
// agent endpoint and the worker's health endpoint; the API's Fiber
// middleware reports through it too. It imports no HTTP framework, so
// every process can use it.
package failure
