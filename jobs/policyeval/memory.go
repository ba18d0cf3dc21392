package policyeval

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Under a data-size ceiling (RLIMIT_DATA, sandbox.Limits.MaxDataBytes)
// a Go program that meets the ceiling does not always fail cleanly: the
// runtime may crash in the collector instead of reporting that it is out
// of memory. WatchMemory lets a program stop itself first, with a verdict
// it can report.

// watchFraction is how much of the ceiling a program may use before its
// watch ends it.
const watchFraction = 0.9

// WatchMemory calls exceeded, once, when the process's data size (VmData,
// what RLIMIT_DATA limits) passes 90% of its RLIMIT_DATA, checking every
// interval. Without a data-size limit it watches nothing. stop ends the
// watch.
func WatchMemory(interval time.Duration, exceeded func()) (stop func()) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_DATA, &lim); err != nil || lim.Cur == unix.RLIM_INFINITY {
		return func() {}
	}
	threshold := uint64(float64(lim.Cur) * watchFraction)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if size, ok := dataSize(); ok && size > threshold {
					exceeded()
					return
				}
			}
		}
	}()
	return func() { close(done) }
}

// dataSize reads VmData from /proc/self/status, in bytes.
func dataSize() (uint64, bool) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmData:")); ok {
			kib, err := strconv.ParseUint(string(bytes.TrimSuffix(bytes.TrimSpace(rest), []byte(" kB"))), 10, 64)
			return kib << 10, err == nil
		}
	}
	return 0, false
}
