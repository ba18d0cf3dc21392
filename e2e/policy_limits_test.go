package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Bounds of TestRunawayPoliciesEndInErrorAndSpareTheWorker.
const (
	runawayTimeout = 4 * time.Second
	// runawayMargin covers starting and tearing down the evaluation
	// process and recording the result.
	runawayMargin = 2 * time.Second
	// workerPeakRSS bounds the worker's resident memory over the whole
	// test (its VmHWM). Evaluated in-process, the template hog alone takes
	// gigabytes within seconds; the worker itself, building five policy
	// sets and running three plans and an apply, peaks near 40 MiB.
	workerPeakRSS = 150 << 20
)

// memoryOf reads a /proc/<pid>/status field in bytes.
func memoryOf(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kib << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// TestRunawayPoliciesEndInErrorAndSpareTheWorker: a policy looping and
// allocating inside one strings.render_template call, and one building a
// huge comprehension, each end their run's policy stage with outcome
// error within the evaluation timeout plus a small margin, while another
// run on the same worker plans, passes its policy and applies; the
// worker's own memory stays bounded throughout (the evaluations ran in
// their own processes). Policy builds whose tests loop or allocate forever
// fail with policy_build_limit_exceeded instead of holding the worker.
func TestRunawayPoliciesEndInErrorAndSpareTheWorker(t *testing.T) {
	t.Parallel()
	s := runsStack(t, "CAIRN_POLICY_EVALUATION_TIMEOUT="+runawayTimeout.String(), "CAIRN_POLICY_EVALUATION_MEMORY_MIB=512",
		"CAIRN_POLICY_BUILD_CPU_SECONDS=3", "CAIRN_POLICY_BUILD_MEMORY_MIB=512")
	s.mu.Lock()
	worker := s.procs["worker"].Process.Pid
	s.mu.Unlock()
	var sampled sync.WaitGroup
	stop := make(chan struct{})
	var peakSample int64
	sampled.Go(func() {
		for {
			if rss, err := memoryOf(worker, "VmRSS"); err == nil {
				peakSample = max(peakSample, rss)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})

	m := s.newMember(t, "runaway")
	builder := s.createWorkspace(t, m, "runaway-builds", "us")
	versions := map[string]policyVersion{}
	var built sync.Mutex
	var builds sync.WaitGroup
	for _, name := range []string{"template-hog", "comprehension-hog", "always-pass", "looping-test", "allocating-test"} {
		builds.Go(func() {
			v := s.publishPolicy(t, m, builder, name)
			built.Lock()
			versions[name] = v
			built.Unlock()
		})
	}
	builds.Wait()
	for name, want := range map[string]string{"template-hog": "published", "comprehension-hog": "published", "always-pass": "published",
		"looping-test": "policy_build_limit_exceeded", "allocating-test": "policy_build_limit_exceeded"} {
		got := versions[name].Status
		if versions[name].FailureCode != nil {
			got = *versions[name].FailureCode
		}
		if got != want {
			t.Fatalf("%s: %s, want %s", name, got, want)
		}
	}

	type outcome struct {
		run    runView
		policy runPolicy
	}
	outcomes := map[string]outcome{}
	var mu sync.Mutex
	var runs sync.WaitGroup
	for _, name := range []string{"template-hog", "comprehension-hog", "always-pass"} {
		ws := s.createWorkspace(t, m, "runaway-"+name, "us")
		s.attachPolicy(t, m, ws, versions[name], "hard_mandatory")
		runs.Go(func() {
			r := s.planRun(t, m, ws, map[string]string{"main.tf": taggedConfig})
			pol, _ := s.runPolicy(t, m, r.ID)
			mu.Lock()
			outcomes[name] = outcome{r, pol}
			mu.Unlock()
		})
	}
	runs.Wait()

	for _, name := range []string{"template-hog", "comprehension-hog"} {
		o := outcomes[name]
		if o.run.Status != "errored" || o.run.TerminalReason == nil || *o.run.TerminalReason != "policy_error" ||
			o.policy.Outcome == nil || *o.policy.Outcome != "error" || len(o.policy.Results) != 1 || o.policy.Results[0].ErrorCode == nil {
			t.Fatalf("%s: run %s %v, policy %+v", name, o.run.Status, o.run.TerminalReason, o.policy)
		}
		code := *o.policy.Results[0].ErrorCode
		if code != "policy_evaluation_timeout" && code != "policy_evaluation_memory_limit" {
			t.Fatalf("%s ended with %s", name, code)
		}
		if o.policy.DurationMS == nil || time.Duration(*o.policy.DurationMS)*time.Millisecond > runawayTimeout+runawayMargin {
			t.Fatalf("%s: the policy stage took %v ms, over %v + %v", name, o.policy.DurationMS, runawayTimeout, runawayMargin)
		}
		t.Logf("%s: %s after %d ms", name, code, *o.policy.DurationMS)
	}
	passing := outcomes["always-pass"]
	if passing.run.Status != "awaiting_approval" || passing.policy.Outcome == nil || *passing.policy.Outcome != "pass" {
		t.Fatalf("the run beside them: %s %+v", passing.run.Status, passing.policy)
	}
	if st, body := s.approve(t, m, passing.run); st != http.StatusOK {
		t.Fatalf("approve: %d %s", st, body)
	}
	s.waitRun(t, m, passing.run.ID, 90*time.Second, status("applied"))

	close(stop)
	sampled.Wait()
	hwm, err := memoryOf(worker, "VmHWM")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("worker peak RSS: VmHWM %.1f MiB, highest sample %.1f MiB (bound %d MiB)", float64(hwm)/(1<<20),
		float64(peakSample)/(1<<20), workerPeakRSS>>20)
	if hwm > workerPeakRSS {
		t.Fatalf("the worker's peak RSS was %.1f MiB, over %d MiB", float64(hwm)/(1<<20), workerPeakRSS>>20)
	}
}
