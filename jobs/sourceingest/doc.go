// Package sourceingest runs source ingestions: the River job behind each
// accepted code-host delivery's deterministic source-ingestion-{id}
// dispatch. The work itself is api/github's; this is its worker.
package sourceingest
