package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// ExecProgram is the name of the program every sandboxed command starts
// through (jobs/cmd/cairn-sandbox-exec).
const ExecProgram = "cairn-sandbox-exec"

// execInside is where bwrap shows cairn-sandbox-exec: outside the sandbox
// directory, whose contents the sandbox's user can change.
const execInside = "/run/cairn/" + ExecProgram

// findExec locates cairn-sandbox-exec: the configured path, else the one
// installed beside the running executable (make build and the image put the
// binaries together), else the one in PATH. A root worker's commands run
// it as root, so a copy that anyone but root or the worker's user could
// change or replace is refused.
func findExec(configured string) (string, error) {
	path := configured
	if path == "" {
		if self, err := os.Executable(); err == nil {
			beside := filepath.Join(filepath.Dir(self), ExecProgram)
			if _, err := os.Stat(beside); err == nil {
				path = beside
			}
		}
	}
	if path == "" {
		found, err := exec.LookPath(ExecProgram)
		if err != nil {
			return "", fmt.Errorf("sandboxes need %s (built by make build beside cairn-worker): %w", ExecProgram, err)
		}
		path = found
	}
	trusted, err := TrustedProgram(path)
	if err != nil {
		return "", fmt.Errorf("sandboxes need %s: %w", ExecProgram, err)
	}
	return trusted, nil
}

// TrustedProgram resolves path (made absolute, links followed) and
// returns it if it is an executable regular file that nobody but root or
// this process's user can change or replace: the programs the worker puts
// into sandboxes (cairn-sandbox-exec, which a root worker's commands run
// as root, and cairn-policy, whose decisions a run's policy gate trusts)
// must be the ones installed.
func TrustedProgram(path string) (string, error) {
	path, err := filepath.Abs(path)
	if err == nil {
		// Checked where it really is: a link's own directory says nothing.
		path, err = filepath.EvalSymlinks(path)
	}
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%s is not an executable file", path)
	}
	// Neither the program nor any directory above it may be changed by
	// anyone but root or this process's user, or another program could
	// take its place (bwrap binds it by path for every command). A sticky
	// directory such as /tmp lets others add entries, not replace ours.
	for p := path; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return "", err
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		writable := fi.Mode()&0o022 != 0 && (p == path || fi.Mode()&fs.ModeSticky == 0)
		if st == nil || (st.Uid != 0 && int(st.Uid) != os.Geteuid()) || writable {
			return "", fmt.Errorf("%s could be replaced: %s is writable by or belongs to another user", path, p)
		}
		if p == filepath.Dir(p) {
			return path, nil
		}
	}
}

// commandArgv wraps a program and its arguments in the sandbox's limits and
// isolation; see Local for the shape of the result.
func (s *localSandbox) commandArgv(dir string, prog []string) ([]string, error) {
	program := s.driver.execPath
	if s.bwrap != "" {
		program = execInside
	}
	argv := []string{program}
	if s.bwrap != "" && s.uid != 0 {
		// The sandbox's own user and group, with no supplementary
		// groups, no capabilities (bounding set included) and no way to
		// gain privileges through setuid programs.
		argv = append(argv, "-user", strconv.FormatUint(uint64(s.uid), 10))
	}
	limits, err := s.rlimitArgs()
	if err != nil {
		return nil, err
	}
	argv = append(append(append(argv, limits...), "--"), prog...)
	if s.bwrap == "" {
		return argv, nil
	}
	return append([]string{s.bwrap}, s.bwrapArgs(dir, argv)...), nil
}

// rlimitArgs are the sandbox's rlimits as cairn-sandbox-exec arguments,
// each set as soft and hard limit and capped at the worker's own hard
// limit, which only a privileged worker could raise. The memory and process
// ceilings are rlimits only where the profile says so; a cgroup enforces
// them otherwise.
func (s *localSandbox) rlimitArgs() ([]string, error) {
	type rlimit struct {
		name     string
		resource int
		value    uint64
	}
	limits := []rlimit{
		{"nofile", unix.RLIMIT_NOFILE, s.limits.MaxOpenFiles},
		{"fsize", unix.RLIMIT_FSIZE, s.limits.MaxFileBytes},
		{"cpu", unix.RLIMIT_CPU, s.limits.MaxCPUSeconds},
		// A core dump would write process memory, run token included, to disk.
		{"core", unix.RLIMIT_CORE, 0},
	}
	switch s.profile.Memory.Mechanism {
	case MechanismRlimitAS:
		limits = append(limits, rlimit{"as", unix.RLIMIT_AS, s.limits.MaxMemoryBytes})
	case MechanismRlimitData:
		limits = append(limits, rlimit{"data", unix.RLIMIT_DATA, s.limits.MaxDataBytes})
	}
	// Under a cgroup the data ceiling still bounds each process.
	if s.limits.MaxDataBytes != 0 && s.profile.Memory.Mechanism == MechanismCgroupMemoryMax {
		limits = append(limits, rlimit{"data", unix.RLIMIT_DATA, s.limits.MaxDataBytes})
	}
	switch s.profile.Processes.Mechanism {
	case MechanismNprocUserNamespace, MechanismNprocDedicatedUID:
		limits = append(limits, rlimit{"nproc", unix.RLIMIT_NPROC, s.limits.MaxProcesses})
	}
	out := make([]string, 0, 2*len(limits))
	for _, lim := range limits {
		var own unix.Rlimit
		if err := unix.Getrlimit(lim.resource, &own); err != nil {
			return nil, fmt.Errorf("reading the worker's %s limit: %w", lim.name, err)
		}
		out = append(out, "-rlimit", lim.name+"="+strconv.FormatUint(min(lim.value, own.Max), 10))
	}
	return out, nil
}
