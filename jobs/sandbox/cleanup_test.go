package sandbox_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cairnhq/cairn/jobs/sandbox"
	"github.com/cairnhq/cairn/jobs/sandbox/sandboxtest"
)

// ownerEnv makes the test binary act as a worker that owns one sandbox:
// it creates it under $CAIRN_SANDBOX_TEST_OWNER_ROOT, writes a plaintext
// input, starts `sleep <marker>` in it, prints the sandbox's directory and
// waits to be killed.
const ownerEnv = "CAIRN_SANDBOX_TEST_OWNER"

func runOwner() {
	mode := sandbox.RequireNamespaces
	if os.Getenv(ownerEnv) == "plain" {
		mode = sandbox.NoIsolation
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "owner:", err)
		os.Exit(3)
	}
	d, err := sandbox.NewLocal(os.Getenv(ownerEnv+"_ROOT"), sandbox.LocalOptions{Base: sandboxtest.Base(), Isolation: mode})
	if err != nil {
		fail(err)
	}
	sbx, err := d.Create(context.Background(), sandbox.Spec{Name: "owned"})
	if err != nil {
		fail(err)
	}
	if err := os.WriteFile(filepath.Join(sbx.WorkDir(), "inputs.tfvars"), []byte(`secret = "plaintext"`), 0o600); err != nil {
		fail(err)
	}
	go func() {
		_, err := sbx.Run(context.Background(), sandbox.Command{Args: []string{"sleep", os.Getenv(ownerEnv + "_MARKER")}})
		fail(fmt.Errorf("the sleep ended: %v", err))
	}()
	fmt.Println(filepath.Dir(sbx.WorkDir()))
	select {}
}

// startOwner runs the owner and returns its process and sandbox directory
// once the sandbox's sleep runs.
func startOwner(t *testing.T, m mode, root, mk string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), ownerEnv+"="+m.name, ownerEnv+"_ROOT="+root, ownerEnv+"_MARKER="+mk)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("owner printed nothing: %v", err)
	}
	waitForProcesses(t, mk, 1)
	return cmd, line[:len(line)-1]
}

// TestSweepRemovesOnlyDeadOwnersLeftovers kills a worker that owns a
// sandbox with a running command, as a crash would. Under namespaces the
// command dies with it; without them it keeps running until a sweep kills
// it. The sweep removes the dead owner's directory and never a live
// sandbox's, nor its running command.
func TestSweepRemovesOnlyDeadOwnersLeftovers(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, m mode) {
		root := t.TempDir()
		opts := sandbox.LocalOptions{Base: sandboxtest.Base(), Isolation: m.isolation, KillGrace: 100 * time.Millisecond}
		d, err := sandbox.NewLocal(root, opts)
		if err != nil {
			t.Fatal(err)
		}
		live, err := d.Create(context.Background(), sandbox.Spec{Name: "live"})
		if err != nil {
			t.Fatal(err)
		}
		defer live.Destroy(context.Background())
		liveMk := marker()
		liveDone := runAsync(context.Background(), live, sandbox.Command{Args: []string{"sleep", liveMk}})
		waitForProcesses(t, liveMk, 1)

		deadMk := marker()
		owner, deadDir := startOwner(t, m, root, deadMk)
		if err := owner.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = owner.Wait()
		if m == isolated {
			// No command outlives its worker: the PID namespace dies with bwrap.
			requireGone(t, deadMk)
		} else if len(processesWith(t, deadMk)) == 0 {
			t.Fatal("control: without namespaces the dead owner's command should still run")
		}
		// A half-made directory of a dead owner, old enough to be dead.
		half := filepath.Join(root, ".new-sbx_aaaaaaaaaaaaaaaaaaaaaaaaaa")
		if err := os.Mkdir(half, 0o700); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-time.Hour)
		_ = os.Chtimes(half, old, old)
		fresh := filepath.Join(root, ".new-sbx_bbbbbbbbbbbbbbbbbbbbbbbbbb")
		if err := os.Mkdir(fresh, 0o700); err != nil {
			t.Fatal(err)
		}

		res, err := d.Sweep(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		requireGone(t, deadMk)
		for _, p := range []string{deadDir, half} {
			if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the sweep left %s: %v", p, err)
			}
		}
		if _, err := os.Stat(fresh); err != nil {
			t.Errorf("the sweep removed a half-made directory that may still be locked soon: %v", err)
		}
		wantProcs := 0
		if m == plain {
			wantProcs = 1
		}
		if res.Directories != 2 || res.Processes < wantProcs {
			t.Errorf("sweep result %+v, want 2 directories and at least %d processes", res, wantProcs)
		}
		// The live sandbox is untouched and its command still runs.
		if _, err := os.Stat(live.WorkDir()); err != nil {
			t.Errorf("the sweep removed a live sandbox: %v", err)
		}
		if len(processesWith(t, liveMk)) == 0 {
			t.Error("the sweep killed a live sandbox's command")
		}
		select {
		case err := <-liveDone:
			t.Errorf("the live command ended: %v", err)
		default:
		}
		// A second sweep finds nothing more.
		if res, err := d.Sweep(context.Background()); err != nil || res != (sandbox.SweepResult{}) {
			t.Errorf("second sweep: %+v, %v", res, err)
		}
		if err := live.Destroy(context.Background()); err != nil {
			t.Fatal(err)
		}
		<-liveDone
		requireGone(t, liveMk)
		_ = os.Remove(fresh)
	})
}

// TestSweepLeavesAnotherWorkersSandboxes: two drivers (two workers) share
// one root; each one's sweep leaves the other's live sandbox alone.
func TestSweepLeavesAnotherWorkersSandboxes(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	mk := marker()
	other, otherDir := startOwner(t, plain, root, mk)
	d, err := sandbox.NewLocal(root, sandbox.LocalOptions{Base: sandboxtest.Base(), Isolation: sandbox.NoIsolation})
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Sweep(context.Background())
	if err != nil || res != (sandbox.SweepResult{}) {
		t.Fatalf("sweep: %+v, %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(otherDir, "work", "inputs.tfvars")); err != nil {
		t.Errorf("the sweep touched another worker's live sandbox: %v", err)
	}
	if len(processesWith(t, mk)) == 0 {
		t.Error("the sweep killed another worker's command")
	}
	// Once that worker dies, its leftovers are this one's to sweep.
	_ = other.Process.Kill()
	_ = other.Wait()
	if res, err := d.Sweep(context.Background()); err != nil || res.Directories != 1 || res.Processes != 1 {
		t.Errorf("sweep after the other worker died: %+v, %v", res, err)
	}
	requireGone(t, mk)
}
