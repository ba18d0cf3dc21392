// Package sandbox is where user code runs: OpenTofu for a run phase, policy
// builds. A Driver creates one Sandbox per attempt: a fresh directory with a
// scrubbed environment, checksum-verified tools installed from a ToolCache,
// and commands that run in their own session and process group under
// resource limits, inside Linux namespaces through bwrap. A Session runs a
// phase's commands in one entry (session.go): cairn-sandbox-exec supervises
// them inside and kills whatever one leaves before the next starts, so only
// files carry over, as between entries.
//
// Isolation fails closed. By default (RequireNamespaces) every command gets
// its own mount, PID, IPC and UTS namespaces (and user and cgroup ones where
// the worker is not root), sees the host only through read-only system paths,
// its own directory and a read-only bind of each tool, and cannot read other
// processes' environments, the data directory or other sandboxes. If bwrap
// is missing or does not work, the driver still starts so the worker can say
// why (Status), but Create refuses with ErrIsolationUnavailable: no user code
// ever runs next to the worker by accident. Running without namespaces
// (NoIsolation) is an explicit operator choice for a single-user machine, and
// every Profile then says so. Network egress stays open by design (SPEC §1
// rule 10): the sandbox keeps one run from seeing the worker's secrets and
// other runs, it is not a boundary against the network.
//
// Ceilings: memory and processes are bounded per sandbox through cgroup v2
// (memory.max, pids.max) where the host delegates a subtree, otherwise
// through rlimits: RLIMIT_AS per process, and RLIMIT_NPROC counted for the
// sandbox alone (set inside its user namespace, or for a user ID of its own
// when the worker is root, since root's processes are never counted). Each
// sandbox records what it really applied (Profile) as attempt evidence.
//
// Crash cleanup (cleanup.go): a worker holds an flock on each of its sandbox
// directories, which the kernel releases when it dies; Sweep removes
// unlocked directories, their processes and cgroups, and never a live one.
//
// The local driver is the only driver today; the interface leaves room for
// one that runs a Kubernetes Job.
package sandbox
