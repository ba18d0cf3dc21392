package sandbox

import (
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// commandArgv wraps a program and its arguments in the sandbox's limits and
// isolation; see Local for the shape of the result.
func (s *localSandbox) commandArgv(dir string, prog []string) ([]string, error) {
	argv, err := s.limited(prog)
	if err != nil {
		return nil, err
	}
	if s.bwrap == "" {
		return argv, nil
	}
	if s.uid != 0 {
		argv = append(s.setprivArgs(), argv...)
	}
	return append([]string{s.bwrap}, s.bwrapArgs(dir, argv)...), nil
}

// setprivArgs switch a root worker's command to the sandbox's own user and
// group, with no supplementary groups, no capabilities (bounding set
// included) and no way to gain privileges through setuid programs.
func (s *localSandbox) setprivArgs() []string {
	id := strconv.FormatUint(uint64(s.uid), 10)
	return []string{s.driver.setpriv, "--reuid=" + id, "--regid=" + id, "--clear-groups",
		"--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"}
}

// limited prefixes argv with prlimit and the sandbox's rlimits, each set as
// soft and hard limit and capped at the worker's own hard limit, which only
// a privileged worker could raise. The memory and process ceilings are
// rlimits only where the profile says so; a cgroup enforces them otherwise.
func (s *localSandbox) limited(argv []string) ([]string, error) {
	type rlimit struct {
		flag     string
		resource int
		value    uint64
	}
	limits := []rlimit{
		{"--nofile", unix.RLIMIT_NOFILE, s.limits.MaxOpenFiles},
		{"--fsize", unix.RLIMIT_FSIZE, s.limits.MaxFileBytes},
		{"--cpu", unix.RLIMIT_CPU, s.limits.MaxCPUSeconds},
		// A core dump would write process memory, run token included, to disk.
		{"--core", unix.RLIMIT_CORE, 0},
	}
	switch s.profile.Memory.Mechanism {
	case MechanismRlimitAS:
		limits = append(limits, rlimit{"--as", unix.RLIMIT_AS, s.limits.MaxMemoryBytes})
	case MechanismRlimitData:
		limits = append(limits, rlimit{"--data", unix.RLIMIT_DATA, s.limits.MaxDataBytes})
	}
	// Under a cgroup the data ceiling still bounds each process.
	if s.limits.MaxDataBytes != 0 && s.profile.Memory.Mechanism == MechanismCgroupMemoryMax {
		limits = append(limits, rlimit{"--data", unix.RLIMIT_DATA, s.limits.MaxDataBytes})
	}
	switch s.profile.Processes.Mechanism {
	case MechanismNprocUserNamespace, MechanismNprocDedicatedUID:
		limits = append(limits, rlimit{"--nproc", unix.RLIMIT_NPROC, s.limits.MaxProcesses})
	}
	out := []string{s.driver.prlimit}
	for _, lim := range limits {
		var own unix.Rlimit
		if err := unix.Getrlimit(lim.resource, &own); err != nil {
			return nil, fmt.Errorf("reading the worker's %s limit: %w", lim.flag, err)
		}
		v := strconv.FormatUint(min(lim.value, own.Max), 10)
		out = append(out, lim.flag+"="+v+":"+v)
	}
	return append(append(out, "--"), argv...), nil
}
