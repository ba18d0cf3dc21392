package devstack

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "github.com/lib/pq" // PostgreSQL driver
)

// Postgres is a private PostgreSQL cluster run from the installed server
// binaries: its own data directory, its own port on 127.0.0.1, its own
// superuser with a random password.
type Postgres struct {
	Dir      string
	Port     int
	User     string
	Password string
	// Durable keeps fsync on. Throwaway test clusters turn it off for speed.
	Durable bool
	// Output receives the server's log lines.
	Output io.Writer

	cmd  *exec.Cmd
	done chan error
}

// FindBinDir locates the PostgreSQL server binaries: $CAIRN_PG_BIN, then the
// highest version under /usr/lib/postgresql, then $PATH.
func FindBinDir() (string, error) {
	if dir := os.Getenv("CAIRN_PG_BIN"); dir != "" {
		return dir, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	sort.Slice(matches, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(matches[i]))))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(matches[j]))))
		return vi > vj
	})
	if len(matches) > 0 {
		return filepath.Dir(matches[0]), nil
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("PostgreSQL server binaries not found: install the postgresql package or set CAIRN_PG_BIN")
}

// handedOut remembers every port FreePort returned in this process. The
// kernel may offer a just-closed port again; parallel stacks in one test
// binary must never both be given it, or one process's server answers
// another's requests.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreePort asks the kernel for an unused TCP port on 127.0.0.1 that this
// process has not handed out before.
func FreePort() (int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port, nil
		}
	}
	return 0, errors.New("no fresh TCP port after 100 tries")
}

// RandomSecret returns n random bytes as hex.
func RandomSecret(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// serverCredential returns the identity the server must run as: PostgreSQL
// refuses to run as root, so root runs it as the postgres user.
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs a postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (pg *Postgres) command(ctx context.Context, cred *syscall.Credential, name string, args ...string) (*exec.Cmd, error) {
	bin, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...)
	// Its own process group: a terminal's Ctrl-C reaches our tool, which
	// then stops the server last, after everything that uses it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.Dir = "/"
	return cmd, nil
}

// Initialized reports whether the data directory already holds a cluster.
func (pg *Postgres) Initialized() bool {
	_, err := os.Stat(filepath.Join(pg.Dir, "PG_VERSION"))
	return err == nil
}

// Init creates the cluster with initdb.
func (pg *Postgres) Init(ctx context.Context) error {
	cred, err := serverCredential()
	if err != nil {
		return err
	}
	// The server user must be able to reach its directory through the parent.
	if err := os.MkdirAll(filepath.Dir(pg.Dir), 0o755); err != nil {
		return err
	}
	if err := os.Chmod(filepath.Dir(pg.Dir), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(pg.Dir, 0o700); err != nil {
		return err
	}
	pwfile, err := os.CreateTemp("", "cairn-pg-pw-")
	if err != nil {
		return err
	}
	defer os.Remove(pwfile.Name())
	if _, err := pwfile.WriteString(pg.Password + "\n"); err != nil {
		return err
	}
	pwfile.Close()
	if cred != nil {
		for _, p := range []string{pg.Dir, pwfile.Name()} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				return err
			}
		}
	}
	cmd, err := pg.command(ctx, cred, "initdb",
		"-D", pg.Dir, "-U", pg.User, "--pwfile="+pwfile.Name(),
		"--auth=scram-sha-256", "--encoding=UTF8", "--locale=C", "--no-instructions")
	if err != nil {
		return err
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	return nil
}

// Start runs the server in the background and waits until it accepts
// connections.
func (pg *Postgres) Start(ctx context.Context) error {
	cred, err := serverCredential()
	if err != nil {
		return err
	}
	// Stale pid file from a killed run: the server refuses to start while it
	// exists, and nothing else of ours could be using this directory.
	_ = os.Remove(filepath.Join(pg.Dir, "postmaster.pid"))
	args := []string{
		"-D", pg.Dir,
		"-p", strconv.Itoa(pg.Port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=" + pg.Dir,
		"-c", "max_connections=300",
		"-c", "shared_buffers=128MB",
		"-c", "log_line_prefix=",
		// Failed statements are the client's to report; dumping their text
		// into the server log could copy values we keep out of logs.
		"-c", "log_min_error_statement=panic",
	}
	if pg.Durable {
		args = append(args, "-c", "log_min_messages=warning")
	} else {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
			"-c", "log_min_messages=fatal")
	}
	// The server must outlive the context that started it; Stop ends it.
	cmd, err := pg.command(context.WithoutCancel(ctx), cred, "postgres", args...)
	if err != nil {
		return err
	}
	out := pg.Output
	if out == nil {
		out = io.Discard
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting postgres: %w", err)
	}
	pg.cmd = cmd
	pg.done = make(chan error, 1)
	go func() { pg.done <- cmd.Wait() }()
	return pg.waitReady(ctx)
}

func (pg *Postgres) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		conn, err := sql.Open("postgres", pg.URL("postgres"))
		if err == nil {
			err = conn.PingContext(ctx)
			conn.Close()
		}
		if err == nil {
			return nil
		}
		select {
		case exitErr := <-pg.done:
			return fmt.Errorf("postgres exited during start-up: %v", exitErr)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within a minute: %w", err)
		}
	}
}

// Stop asks the server for a fast shutdown and waits for it.
func (pg *Postgres) Stop() error {
	if pg.cmd == nil || pg.cmd.Process == nil {
		return nil
	}
	_ = pg.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-pg.done:
	case <-time.After(30 * time.Second):
		_ = pg.cmd.Process.Kill()
		<-pg.done
	}
	pg.cmd = nil
	return nil
}

// Kill SIGKILLs the postmaster and every one of its server processes at
// once, as a crashed machine loses them, and waits until the postmaster is
// gone. Each server process leads its own session, so the postmaster's
// process group does not reach them; they are found by their parent. Start
// then brings the cluster back on the same data directory, through crash
// recovery from its write-ahead log.
func (pg *Postgres) Kill() {
	if pg.cmd == nil || pg.cmd.Process == nil {
		return
	}
	pid := pg.cmd.Process.Pid
	children := childProcesses(pid)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for _, c := range children {
		_ = syscall.Kill(c, syscall.SIGKILL)
	}
	<-pg.done
	// A server process forked between the listing and the kill notices
	// its postmaster's death and exits; wait for the listed ones.
	for _, c := range children {
		for i := 0; i < 200 && syscall.Kill(c, 0) == nil; i++ {
			time.Sleep(10 * time.Millisecond)
		}
	}
	pg.cmd = nil
}

// childProcesses lists the processes whose parent is pid, from /proc.
func childProcesses(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces and parentheses,
		// so the fields start after the last ')'.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// URL is the connection URL of a database in this cluster.
func (pg *Postgres) URL(database string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(pg.User, pg.Password),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(pg.Port)),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// CreateDatabase creates a database unless it exists.
func (pg *Postgres) CreateDatabase(ctx context.Context, name string) error {
	conn, err := sql.Open("postgres", pg.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close()
	var exists bool
	if err := conn.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err = conn.ExecContext(ctx, `CREATE DATABASE `+quoteIdent(name))
	return err
}

// CloneDatabase creates database name as a copy of template (which nobody
// may be connected to meanwhile).
func (pg *Postgres) CloneDatabase(ctx context.Context, name, template string) error {
	conn, err := sql.Open("postgres", pg.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = conn.ExecContext(ctx, `CREATE DATABASE `+quoteIdent(name)+` TEMPLATE `+quoteIdent(template))
	return err
}

func quoteIdent(s string) string {
	out := []byte{'"'}
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			out = append(out, '"')
		}
		out = append(out, s[i])
	}
	return string(append(out, '"'))
}
