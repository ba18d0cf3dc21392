// Command tamper is what a hostile command in a sandbox session tries
// against the process that will start the next command: for each attempt on
// PID 1 (the session's supervisor) it prints the attempt's name and "ok" or
// the error. The session tests build it and expect every attempt refused.
package main

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

func main() {
	const target = 1
	report := func(name string, err error) {
		if err == nil {
			fmt.Println(name, "ok")
			return
		}
		fmt.Println(name, err)
	}
	// Lower what the next command would inherit.
	low := unix.Rlimit{Cur: 20, Max: 20}
	report("prlimit", unix.Prlimit(target, unix.RLIMIT_NOFILE, &low, nil))
	report("setpriority", unix.Setpriority(unix.PRIO_PROCESS, target, 19))
	report("sched_setaffinity", unix.SchedSetaffinity(target, &unix.CPUSet{1}))
	// Take it over, or stop or kill it.
	report("ptrace", unix.PtraceAttach(target))
	report("sigstop", unix.Kill(target, unix.SIGSTOP))
	report("sigkill", unix.Kill(target, unix.SIGKILL))
	_, err := os.ReadFile("/proc/1/environ")
	report("environ", err)
	_, err = os.ReadDir("/proc/1/fd")
	report("fds", err)
}
