// Package sessionwire is the protocol between the worker's sandbox driver
// and cairn-sandbox-exec when it supervises a sandbox session: one sandbox
// entry (one bwrap) that runs a phase's commands one after another instead
// of entering the namespaces again for each. It is its own small package so
// that cairn-sandbox-exec, started for every command, links nothing else.
//
// The two ends share a Unix stream socket. Each message is a frame: a
// four-byte big-endian length, then that many bytes. The worker sends a
// Request with the command's standard output and error attached to the
// frame's first byte as SCM_RIGHTS, and may send Signal frames while the
// command runs; the supervisor answers each Request with one Reply, sent
// only once the command and everything it left running are gone.
package sessionwire
