package sandbox_test

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairnhq/cairn/jobs/sandbox"
)

// TestOpenAndCreateStayInTheWorkDirectory plants, from inside a sandbox,
// what a configuration's code could leave for the worker: links to a host
// file and to a host directory, a FIFO and a directory where the worker
// expects its files. Open and Create refuse each without following it, the
// host file keeps its content, and a FIFO never blocks the worker.
func TestOpenAndCreateStayInTheWorkDirectory(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, m mode) {
		f := setup(t, m, sandbox.Spec{}, sandbox.LocalOptions{})
		outside := t.TempDir()
		victim := filepath.Join(outside, "victim")
		if err := os.WriteFile(victim, []byte("host-only"), 0o644); err != nil {
			t.Fatal(err)
		}
		script := `mkdir -p out && echo own > out/plain && ln -s plain out/inner &&
ln -s ` + victim + ` out/file-link && ln -s ` + outside + ` dir-link && mkfifo out/fifo && mkdir out/dir`
		if code, _, stderr := run(t, f.sbx, sh(script)); code != 0 {
			t.Fatalf("planting exited %d: %s", code, stderr)
		}

		if got := readAll(t, f.sbx, "out/plain"); got != "own\n" {
			t.Errorf("Open(out/plain) = %q", got)
		}
		for _, name := range []string{"out/inner", "out/file-link", "dir-link/victim", "out/fifo", "out/dir"} {
			done := make(chan error, 1)
			go func() {
				file, err := f.sbx.Open(name)
				if err == nil {
					file.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if !errors.Is(err, sandbox.ErrUnsafePath) {
					t.Errorf("Open(%s) = %v, want ErrUnsafePath", name, err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("Open(%s) blocked", name)
			}
		}
		if _, err := f.sbx.Open("out/missing"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Open(out/missing) = %v, want ErrNotExist", err)
		}
		for _, name := range []string{"../escape", "/etc/passwd", "out/../out/plain"} {
			if _, err := f.sbx.Open(name); !errors.Is(err, sandbox.ErrInvalidSpec) {
				t.Errorf("Open(%q) = %v, want ErrInvalidSpec", name, err)
			}
		}

		// Create replaces a planted link with a file of its own.
		w, err := f.sbx.Create("out/file-link")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(w, "worker's"); err != nil {
			t.Fatal(err)
		}
		w.Close()
		if got := readAll(t, f.sbx, "out/file-link"); got != "worker's" {
			t.Errorf("after Create, out/file-link reads %q", got)
		}
		if b, _ := os.ReadFile(victim); string(b) != "host-only" {
			t.Errorf("Create wrote through a planted link: the host file reads %q", b)
		}
		if _, err := f.sbx.Create("dir-link/victim"); !errors.Is(err, sandbox.ErrUnsafePath) {
			t.Errorf("Create(dir-link/victim) = %v, want ErrUnsafePath", err)
		}
		if _, err := f.sbx.Create("out/dir"); !errors.Is(err, sandbox.ErrUnsafePath) {
			t.Errorf("Create(out/dir) = %v, want ErrUnsafePath", err)
		}
		if entries, _ := os.ReadDir(outside); len(entries) != 1 {
			t.Errorf("the host directory behind a planted link changed: %v", entries)
		}
		// A file the worker creates is one later commands can read.
		if code, out, _ := run(t, f.sbx, sh("cat out/file-link")); code != 0 || out != "worker's" {
			t.Errorf("the sandbox reads the created file: %d %q", code, out)
		}
	})
}

func readAll(t *testing.T, sbx sandbox.Sandbox, name string) string {
	t.Helper()
	f, err := sbx.Open(name)
	if err != nil {
		t.Fatalf("Open(%s): %v", name, err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
