// Package moduleingest runs module ingestions: the River job behind each
// tag push or sync that publishes a registry module version from the code
// host (the deterministic module-ingestion-{id} dispatch). The work itself
// is api/registry's; this is its worker.
package moduleingest
