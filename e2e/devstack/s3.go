package devstack

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// VersityModule is the S3-compatible gateway tests use as real object
// storage, built from its published Go module.
const (
	VersityModule  = "github.com/versity/versitygw"
	VersityVersion = "1.8.0"
)

// EnsureVersity builds the pinned versitygw into .tools/versitygw/<version>/
// under root, once, like the OpenTofu build.
func EnsureVersity(ctx context.Context, root string, log io.Writer) (string, error) {
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(absRoot, ".tools", "versitygw", VersityVersion)
	bin := filepath.Join(dir, "versitygw")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	fmt.Fprintf(log, "==> building versitygw %s from %s (a few minutes the first time)\n", VersityVersion, VersityModule)
	if err := buildFromModule(ctx, VersityModule, VersityVersion, "./cmd/versitygw", "-s -w", bin, log); err != nil {
		return "", fmt.Errorf("building versitygw: %w", err)
	}
	return bin, nil
}

// S3Server is a versitygw serving a POSIX directory over S3 on loopback.
type S3Server struct {
	Bin       string
	Dir       string
	Port      int
	AccessKey string
	SecretKey string
	Output    io.Writer

	cmd  *exec.Cmd
	done chan error
}

// Endpoint is the server's base URL.
func (s *S3Server) Endpoint() string { return "http://127.0.0.1:" + strconv.Itoa(s.Port) }

// Start runs the gateway and waits until it accepts connections.
func (s *S3Server) Start(ctx context.Context) error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return err
	}
	cmd := exec.Command(s.Bin, "--port", "127.0.0.1:"+strconv.Itoa(s.Port), "posix", s.Dir)
	// Keys go through the environment, not the command line, which any
	// local user can read.
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.AccessKey, "ROOT_SECRET_ACCESS_KEY="+s.SecretKey)
	out := s.Output
	if out == nil {
		out = io.Discard
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting versitygw: %w", err)
	}
	s.cmd = cmd
	s.done = make(chan error, 1)
	go func() { s.done <- cmd.Wait() }()
	return waitUntilReady(ctx, "versitygw", s.done, s.Stop, func() error {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(s.Port), time.Second)
		if err == nil {
			conn.Close()
		}
		return err
	})
}

// waitUntilReady polls ready for up to 30 s while the process started by
// the caller runs; a process that exits, a canceled context or a deadline
// ends the wait (and the process, through stop).
func waitUntilReady(ctx context.Context, name string, done chan error, stop func() error, ready func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		select {
		case exitErr := <-done:
			return fmt.Errorf("%s exited during start-up: %v", name, exitErr)
		case <-ctx.Done():
			_ = stop()
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = stop()
			return fmt.Errorf("%s was not ready within 30s: %w", name, err)
		}
	}
}

// Stop ends the gateway and waits for it.
func (s *S3Server) Stop() error {
	stopProcess(s.cmd, s.done)
	s.cmd = nil
	return nil
}

// stopProcess sends SIGTERM and waits for the process, killing it after
// 10 s; nil (never started or already stopped) is a no-op.
func stopProcess(cmd *exec.Cmd, done chan error) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}
