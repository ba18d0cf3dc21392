package main

import (
	"bytes"
	"context"
	"database/sql"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var idleWindow = flag.Duration("idle-window", 60*time.Second, "how long the idle phase watches an idle cairn-api and cairn-worker")

// Targets of the idle phase (issue 32, Build 9): OTF's single process
// held 69–72 MiB at idle on the machine the issue was measured on, and an
// idle process should use no measurable CPU.
const (
	idleRSSTargetMiB = 72
	// Percent of one core: what is left once nothing polls (River's
	// timers, the reaper's periodic job) is under a tenth of a percent;
	// River's completer ticking every 50 ms made it 0.4.
	idleCPUTarget = 0.2
)

// procSample is one reading of a process's resident memory and CPU time.
type procSample struct {
	rssKiB     int64
	rssAnonKiB int64 // heap, stacks and the runtime's own: what the process allocated
	rssFileKiB int64 // pages of the binary (and other files) it touched
	cpuTicks   int64 // utime + stime, in clock ticks
}

// sampleProc reads /proc/PID/status (VmRSS) and /proc/PID/stat (fields
// 14 and 15, counted after the parenthesized command name, which may hold
// spaces).
func sampleProc(pid int) (procSample, error) {
	var s procSample
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	fields := map[string]*int64{"VmRSS:": &s.rssKiB, "RssAnon:": &s.rssAnonKiB, "RssFile:": &s.rssFileKiB}
	for _, line := range strings.Split(string(status), "\n") {
		for name, into := range fields {
			if rest, ok := strings.CutPrefix(line, name); ok {
				if f := strings.Fields(rest); len(f) > 0 {
					*into, _ = strconv.ParseInt(f[0], 10, 64)
				}
			}
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return s, fmt.Errorf("unreadable /proc/%d/stat", pid)
	}
	// After ") " come field 3 (state) onwards: utime and stime are the
	// 12th and 13th of those.
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return s, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	s.cpuTicks = utime + stime
	if s.rssKiB == 0 {
		return s, fmt.Errorf("no VmRSS for process %d", pid)
	}
	return s, nil
}

// clockTicks is the kernel's USER_HZ, which /proc/PID/stat counts in.
func clockTicks() int64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		return 100
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil || n <= 0 {
		return 100
	}
	return n
}

// databaseTransactions is how many transactions the database has committed
// and rolled back: an idle stack's polling shows up here even when its own
// CPU time is too small to see.
func databaseTransactions(admin, dbURL string) (int64, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return 0, err
	}
	conn, err := sql.Open("postgres", admin)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	// The statistics of other backends reach the view within a second.
	var n int64
	err = conn.QueryRow(`SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1`,
		strings.TrimPrefix(u.Path, "/")).Scan(&n)
	return n, err
}

// sleepCtx waits d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// startIdleWorker runs the real cairn-worker beside api as startWorker
// does, and returns its process ID.
func startIdleWorker(dbURL string, api *apiProcess, bundle string) (int, func(), error) {
	mirror, err := filepath.Abs(filepath.Join(".tools", "toolchains"))
	if err != nil {
		return 0, nil, err
	}
	cmd := exec.Command(filepath.Join(envOr("CAIRN_BIN_DIR", "bin"), "cairn-worker"))
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL,
		"AUTH_SECRET=bench-auth-secret-0123456789abcdef0123456789abcdef",
		"CAIRN_MASTER_KEY=AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
		"CAIRN_PUBLIC_URL="+api.URL, "CAIRN_DATA_DIR="+api.DataDir, "SSL_CERT_FILE="+bundle,
		"CAIRN_TOOLCHAIN_DIR="+mirror, "CAIRN_LOG_LEVEL="+envOr("CAIRN_BENCH_API_LOG", "warn"),
		"CAIRN_WORKER_HEALTH_ADDR=off")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return 0, nil, err
	}
	return cmd.Process.Pid, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM); _ = cmd.Wait() }, nil
}

// benchIdle measures what an idle cairn-api and cairn-worker cost: resident
// memory once they have started and again after the idle window, the CPU
// time each used over the window and the database transactions the stack
// ran meanwhile. Nothing calls them during the window.
func benchIdle(ctx context.Context, admin string) error {
	dbURL, err := freshDatabase(admin)
	if err != nil {
		return err
	}
	api, files, stopAPI, err := startTLSAPI(dbURL)
	if err != nil {
		return err
	}
	defer stopAPI()
	workerPID, stopWorker, err := startIdleWorker(dbURL, api, files.Bundle)
	if err != nil {
		return err
	}
	defer stopWorker()
	// Start-up work (migrations checks, the worker's first sandbox sweep,
	// River's leader election and periodic jobs run on start) settles.
	if err := sleepCtx(ctx, 10*time.Second); err != nil {
		return err
	}
	procs := []struct {
		name string
		pid  int
	}{{"cairn-api", api.PID}, {"cairn-worker", workerPID}}
	before := make([]procSample, len(procs))
	for i, p := range procs {
		if before[i], err = sampleProc(p.pid); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
	}
	txBefore, err := databaseTransactions(admin, dbURL)
	if err != nil {
		return err
	}
	started := time.Now()
	// The deadline ends the window early, and the deferred stops still
	// end both processes: an abandoned phase must leave nothing running.
	if err := sleepCtx(ctx, *idleWindow); err != nil {
		return err
	}
	elapsed := time.Since(started)
	txAfter, err := databaseTransactions(admin, dbURL)
	if err != nil {
		return err
	}
	hz := clockTicks()
	mib := func(kib int64) float64 { return float64(kib) / 1024 }
	fmt.Printf("\nidle: cairn-api and cairn-worker over %s with nothing to do\n", elapsed.Round(time.Second))
	var rssSum float64
	for i, p := range procs {
		after, err := sampleProc(p.pid)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		cpu := float64(after.cpuTicks-before[i].cpuTicks) / float64(hz) / elapsed.Seconds() * 100
		size := int64(0)
		if fi, err := os.Stat(filepath.Join(envOr("CAIRN_BIN_DIR", "bin"), p.name)); err == nil {
			size = fi.Size()
		}
		rssSum += mib(after.rssKiB)
		fmt.Printf("  %-13s RSS after start %6.1f MiB, after %s idle %6.1f MiB (anonymous %5.1f, file %5.1f)  CPU %5.2f %% of a core  binary %5.1f MiB  [target CPU < %.1f %%]\n",
			p.name, mib(before[i].rssKiB), elapsed.Round(time.Second), mib(after.rssKiB), mib(after.rssAnonKiB), mib(after.rssFileKiB),
			cpu, float64(size)/(1<<20), idleCPUTarget)
	}
	fmt.Printf("  %-13s RSS %6.1f MiB  [target: at most OTF's %d MiB]\n", "together", rssSum, idleRSSTargetMiB)
	fmt.Printf("  %-13s %.1f transactions per minute on the stack's database\n", "database",
		float64(txAfter-txBefore)/elapsed.Minutes())
	return nil
}
