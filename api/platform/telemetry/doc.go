// Package telemetry is Cairn's operational telemetry and its boundary.
// Metrics: a Prometheus registry per process with only bounded label sets
// (route templates, methods, status classes, queue names, job states,
// regions), served at /metrics. Events: every operational event passes
// Validate, which accepts only registered event names and typed values —
// opaque IDs, bounded enums, durations, counts and byte sizes — so
// repository names, cloud identifiers, resource addresses, e-mail
// addresses, secrets and artifact content cannot cross it (SPEC §6). It
// imports no HTTP framework, so the worker links it without the API's:
// the API's Fiber middleware hands it route templates, methods and status
// codes (api/server).
package telemetry
