package devstack

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/cairnhq/cairn/jobs/sandbox"
)

// DexModule is the directory of the tools module that pins Dex, the OIDC
// identity provider the SSO tests sign in through. It is a module of its
// own: Dex's dependency graph stays out of Cairn's go.mod, and Dex's own
// replace of its api/v2 module (absent from its module zip) is ignored.
const DexModule = "e2e/tools/dex"

// EnsureDex builds Dex from the tools module into .tools/dex/dex under
// root, once: a binary whose recorded checksum (with the go.sum it was
// built from) still matches is kept.
func EnsureDex(ctx context.Context, root string, log io.Writer) (string, error) {
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(absRoot, ".tools", "dex")
	bin := filepath.Join(dir, "dex")
	sums := filepath.Join(dir, "SHA256SUMS")
	goSum, err := sandbox.FileSHA256(filepath.Join(absRoot, DexModule, "go.sum"))
	if err != nil {
		return "", fmt.Errorf("reading the Dex tools module: %w", err)
	}
	if recorded, err := os.ReadFile(sums); err == nil {
		if binSum, err := sandbox.FileSHA256(bin); err == nil && bytes.Equal(recorded, dexSums(goSum, binSum)) {
			return bin, nil
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	fmt.Fprintf(log, "==> building Dex from %s (a few minutes the first time)\n", DexModule)
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin+".tmp", "github.com/dexidp/dex/cmd/dex")
	build.Dir = filepath.Join(absRoot, DexModule)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = log, log
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("building Dex: %w", err)
	}
	if err := os.Rename(bin+".tmp", bin); err != nil {
		return "", err
	}
	binSum, err := sandbox.FileSHA256(bin)
	if err != nil {
		return "", err
	}
	return bin, os.WriteFile(sums, dexSums(goSum, binSum), 0o644)
}

func dexSums(goSum, binSum string) []byte {
	return []byte(goSum + "  go.sum\n" + binSum + "  dex\n")
}

// DexServer is a Dex process serving one configuration on loopback.
type DexServer struct {
	Bin    string
	Dir    string
	Port   int
	Output io.Writer

	cmd  *exec.Cmd
	done chan error
}

// Issuer is the server's issuer URL.
func (d *DexServer) Issuer() string { return "http://127.0.0.1:" + strconv.Itoa(d.Port) + "/dex" }

// Start writes config (YAML, with the issuer and address already in it)
// and runs Dex until its discovery document answers.
func (d *DexServer) Start(ctx context.Context, config string) error {
	path := filepath.Join(d.Dir, "dex.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(d.Bin, "serve", path)
	out := d.Output
	if out == nil {
		out = io.Discard
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting Dex: %w", err)
	}
	d.cmd, d.done = cmd, make(chan error, 1)
	go func() { d.done <- cmd.Wait() }()
	return waitUntilReady(ctx, "Dex", d.done, d.Stop, func() error {
		resp, err := http.Get(d.Issuer() + "/.well-known/openid-configuration")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("discovery: %d", resp.StatusCode)
		}
		return nil
	})
}

// Stop ends Dex and waits for it.
func (d *DexServer) Stop() error {
	stopProcess(d.cmd, d.done)
	d.cmd = nil
	return nil
}
