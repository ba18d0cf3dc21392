// Package sandbox is where OpenTofu runs for a managed run phase. A Driver
// creates one Sandbox per phase attempt: a fresh directory with a scrubbed
// environment, checksum-verified tools installed from a ToolCache, and
// commands that run in their own session and process group under resource
// limits, inside Linux namespaces through bwrap when it is available. Network
// egress stays open by design (SPEC §1 rule 10): the sandbox keeps one run
// from seeing the worker's files, environment and other runs, it is not a
// boundary against the network. The local driver is the only driver today;
// the interface leaves room for one that runs a Kubernetes Job.
package sandbox
