// Package assembly builds Cairn's domain services from configuration, once,
// for every process that needs them: cairn-api serves them over its HTTP
// surfaces and cairn-worker runs their jobs. It sits below the surfaces and
// imports no HTTP framework, so a process links only what it uses — the
// worker carries neither Fiber nor huma nor the handlers of /v1 and
// /api/v2.
package assembly
