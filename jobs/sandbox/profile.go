package sandbox

// Isolation values of a Profile.
const (
	// IsolationNamespaces: commands run in their own mount, PID, IPC and UTS
	// namespaces (and user and cgroup namespaces where the driver can).
	IsolationNamespaces = "namespaces"
	// IsolationNone: the operator opted out; commands run next to the
	// worker with its view of the host.
	IsolationNone = "none"
	// IsolationUnavailable: namespaces are required but do not work on
	// this host, so no command runs at all.
	IsolationUnavailable = "unavailable"
)

// Mechanisms that enforce a Ceiling.
const (
	// MechanismCgroupMemoryMax is cgroup v2 memory.max on the sandbox's own
	// cgroup: one ceiling for the whole process tree.
	MechanismCgroupMemoryMax = "cgroup_v2_memory_max"
	// MechanismRlimitAS is RLIMIT_AS: an address-space ceiling per process.
	MechanismRlimitAS = "rlimit_as"
	// MechanismRlimitData is RLIMIT_DATA: a ceiling per process on the
	// private writable memory it maps, for a command whose Limits set
	// MaxDataBytes (it replaces the address-space ceiling there).
	MechanismRlimitData = "rlimit_data"
	// MechanismCgroupPidsMax is cgroup v2 pids.max on the sandbox's cgroup.
	MechanismCgroupPidsMax = "cgroup_v2_pids_max"
	// MechanismNprocUserNamespace is RLIMIT_NPROC set inside the sandbox's
	// own user namespace, which the kernel counts per namespace (ucounts).
	MechanismNprocUserNamespace = "rlimit_nproc_user_namespace"
	// MechanismNprocDedicatedUID is RLIMIT_NPROC for a user ID no other
	// sandbox or process of this host uses; a root worker's sandboxes get one.
	MechanismNprocDedicatedUID = "rlimit_nproc_dedicated_uid"
	// MechanismNone means the ceiling is not enforced.
	MechanismNone = "none"
)

// Ceiling is one resource ceiling as applied.
type Ceiling struct {
	// Limit is in bytes for memory and in tasks (processes and threads)
	// for processes; zero when not enforced.
	Limit     uint64 `json:"limit"`
	Mechanism string `json:"mechanism"`
}

// Profile is what a sandbox really applies: recorded as evidence of each
// attempt, so a review states facts, not configuration.
type Profile struct {
	Driver    string `json:"driver"`
	Isolation string `json:"isolation"`
	// Reason is a stable code saying why isolation is unavailable.
	Reason string `json:"reason,omitempty"`
	// Namespaces the commands get of their own.
	Namespaces []string `json:"namespaces,omitempty"`
	// Base and BaseDigest identify the managed base commands saw as their
	// system paths; empty without namespaces, where they see the host.
	Base       string `json:"base,omitempty"`
	BaseDigest string `json:"base_digest,omitempty"`
	// Network is "shared": egress stays open by design (SPEC §1 rule 10).
	Network string `json:"network,omitempty"`
	// User is "dedicated_uid" when commands run as a user ID of their own
	// (a root worker), "worker" when they run as the worker's user.
	User       string  `json:"user,omitempty"`
	Memory     Ceiling `json:"memory"`
	Processes  Ceiling `json:"processes"`
	CPUSeconds uint64  `json:"cpu_seconds,omitempty"`
	OpenFiles  uint64  `json:"open_files,omitempty"`
	FileBytes  uint64  `json:"file_bytes,omitempty"`
}

// Status is what a driver can do on this host, for health output and for
// the evidence of attempts it refuses.
type Status struct {
	// Ready reports whether sandboxes can be created. False only when
	// namespaces are required and unavailable.
	Ready bool `json:"ready"`
	// Reason is a stable code when not ready (bwrap_not_found,
	// bwrap_unusable, sandbox_uids_unavailable, sandbox_base_unavailable).
	Reason string `json:"reason,omitempty"`
	// Detail explains Reason for the operator; it never holds a secret.
	Detail string `json:"detail,omitempty"`
	// Cgroup explains why cgroup v2 ceilings are not in use, if they are not.
	Cgroup string `json:"cgroup,omitempty"`
	// Profile is what a sandbox created now with default limits gets.
	Profile Profile `json:"profile"`
}
