package devstack

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is one long-running program of the stack.
type Process struct {
	Name string
	Path string
	Args []string
	Env  []string
}

// PrefixWriter writes each line it receives to out behind a fixed prefix, so
// the interleaved logs of several processes stay readable.
type PrefixWriter struct {
	mu     *sync.Mutex
	out    io.Writer
	prefix string
	buf    []byte
}

// NewPrefixWriter returns a writer sharing mu with its siblings.
func NewPrefixWriter(mu *sync.Mutex, out io.Writer, prefix string) *PrefixWriter {
	return &PrefixWriter{mu: mu, out: out, prefix: prefix}
}

func (w *PrefixWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := strings.IndexByte(string(w.buf), '\n')
		if i < 0 {
			break
		}
		fmt.Fprintf(w.out, "%s%s\n", w.prefix, w.buf[:i])
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

// Supervise starts every process and waits. When ctx ends or any process
// exits, the others get SIGTERM, then SIGKILL after a grace period. It
// returns the first process failure, or nil after a requested stop.
func Supervise(ctx context.Context, procs []Process, out io.Writer) error {
	var mu sync.Mutex
	width := 0
	for _, p := range procs {
		width = max(width, len(p.Name))
	}
	type exit struct {
		name string
		err  error
	}
	exits := make(chan exit, len(procs))
	var started []*exec.Cmd
	stopAll := func() {
		for _, cmd := range started {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		}
	}
	for _, p := range procs {
		cmd := exec.Command(p.Path, p.Args...)
		cmd.Env = append(os.Environ(), p.Env...)
		w := NewPrefixWriter(&mu, out, fmt.Sprintf("%-*s | ", width, p.Name))
		cmd.Stdout, cmd.Stderr = w, w
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			stopAll()
			return fmt.Errorf("starting %s: %w", p.Name, err)
		}
		started = append(started, cmd)
		go func(name string, cmd *exec.Cmd) { exits <- exit{name, cmd.Wait()} }(p.Name, cmd)
	}
	var first error
	remaining := len(started)
	select {
	case <-ctx.Done():
	case e := <-exits:
		first = fmt.Errorf("%s exited: %v", e.name, e.err)
		remaining--
	}
	// Signalling a group that already exited is harmless (ESRCH).
	stopAll()
	grace := time.After(20 * time.Second)
	for remaining > 0 {
		select {
		case <-exits:
			remaining--
		case <-grace:
			for _, cmd := range started {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			}
			grace = nil
		}
	}
	return first
}
