package sandbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/jobs/sandbox"
	"github.com/cairnhq/cairn/jobs/sandbox/sandboxtest"
)

// readBaseManifest reads the BASE.json of the base in dir.
func readBaseManifest(t *testing.T, dir string) sandbox.BaseManifest {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, sandbox.BaseManifestName))
	if err != nil {
		t.Fatalf("the managed base is missing (make tools builds it): %v", err)
	}
	var m sandbox.BaseManifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSandboxStartsFromTheManagedBase: a namespaced sandbox's system paths
// are the managed base's, not the host's (SPEC §1 rule 10). The host's
// bwrap and its user database stay out of sight, the base's programs run,
// the host's resolver files show through (egress is the host's), and the
// profile an attempt records names the base's version and digest.
func TestSandboxStartsFromTheManagedBase(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	m := readBaseManifest(t, sandboxtest.Base())
	f := setup(t, isolated, sandbox.Spec{Name: "base"}, sandbox.LocalOptions{Base: sandboxtest.Base()})
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatal(err)
	}
	code, out, stderr := run(t, f.sbx, sh(`test -e `+bwrap+` && echo host-bwrap-visible; cat /etc/passwd; `+
		`test -s /etc/ssl/certs/ca-certificates.crt && echo certs; test -e /etc/resolv.conf && echo resolv`))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Contains(out, "host-bwrap-visible") {
		t.Errorf("the host's %s is visible in the sandbox: its /usr is the host's, not the base's", bwrap)
	}
	hostPasswd, err := os.ReadFile(filepath.Join(sandboxtest.Base(), sandbox.BaseRootName, "etc", "passwd"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, string(hostPasswd)) || !strings.Contains(out, "certs\nresolv\n") {
		t.Errorf("sandbox sees\n%s\nwant the base's passwd (%q), its CA bundle and the host's resolv.conf", out, hostPasswd)
	}
	p := f.sbx.Profile()
	if p.Base != m.Version || p.BaseDigest != m.Digest || p.Base == "" {
		t.Errorf("profile base %q %q, want %q %q", p.Base, p.BaseDigest, m.Version, m.Digest)
	}
	if st := f.driver.Status(); st.Profile.BaseDigest != m.Digest {
		t.Errorf("status profile digest %q, want %q", st.Profile.BaseDigest, m.Digest)
	}
}

// TestSandboxBaseFailsClosed: a worker whose base is missing, changed after
// it was built, writable by others, or not the digest the operator pinned
// creates no sandbox at all; an intact copy works.
func TestSandboxBaseFailsClosed(t *testing.T) {
	t.Parallel()
	requireBwrap(t)
	m := readBaseManifest(t, sandboxtest.Base())
	copyBase := func(t *testing.T) string {
		dst := filepath.Join(t.TempDir(), "base")
		if out, err := exec.Command("cp", "-a", sandboxtest.Base(), dst).CombinedOutput(); err != nil {
			t.Fatalf("copying the base: %v: %s", err, out)
		}
		return dst
	}
	for name, tc := range map[string]struct {
		base   func(t *testing.T) string
		digest string
		ready  bool
	}{
		"intact copy":     {base: copyBase, ready: true},
		"intact, pinned":  {base: copyBase, digest: m.Digest, ready: true},
		"not configured":  {base: func(*testing.T) string { return "" }},
		"missing":         {base: func(t *testing.T) string { return filepath.Join(t.TempDir(), "absent") }},
		"pinned to other": {base: copyBase, digest: "sha256:" + strings.Repeat("0", 64)},
		"file changed": {base: func(t *testing.T) string {
			dir := copyBase(t)
			appendFile(t, filepath.Join(dir, sandbox.BaseRootName, "etc", "passwd"), "intruder:x:0:0::/:/bin/sh\n")
			return dir
		}},
		"file added": {base: func(t *testing.T) string {
			dir := copyBase(t)
			appendFile(t, filepath.Join(dir, sandbox.BaseRootName, "usr", "bin", "planted"), "#!/bin/sh\n")
			return dir
		}},
		"manifest rewritten to another digest": {base: func(t *testing.T) string {
			dir := copyBase(t)
			changed := m
			changed.Digest = "sha256:" + strings.Repeat("1", 64)
			raw, _ := json.Marshal(changed)
			if err := os.WriteFile(filepath.Join(dir, sandbox.BaseManifestName), raw, 0o644); err != nil {
				t.Fatal(err)
			}
			return dir
		}},
		// Ownership is outside the digest: a user who owns an entry could
		// rewrite it after the worker verified the base.
		"an entry owned by another user": {base: func(t *testing.T) string {
			if os.Geteuid() != 0 {
				t.Skip("changing an owner needs root")
			}
			dir := copyBase(t)
			if err := os.Lchown(filepath.Join(dir, sandbox.BaseRootName, "usr"), 12345, 12345); err != nil {
				t.Fatal(err)
			}
			return dir
		}},
		"writable by others": {base: func(t *testing.T) string {
			dir := copyBase(t)
			if err := os.Chmod(filepath.Join(dir, sandbox.BaseRootName), 0o777); err != nil {
				t.Fatal(err)
			}
			return dir
		}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d, err := sandbox.NewLocal(t.TempDir(), sandbox.LocalOptions{Base: tc.base(t), BaseDigest: tc.digest})
			if err != nil {
				t.Fatal(err)
			}
			st := d.Status()
			sbx, createErr := d.Create(context.Background(), sandbox.Spec{Name: "base"})
			if !tc.ready {
				if st.Ready || st.Reason != "sandbox_base_unavailable" || !errors.Is(createErr, sandbox.ErrIsolationUnavailable) {
					t.Fatalf("status %+v, Create error %v: want refused with sandbox_base_unavailable", st, createErr)
				}
				if st.Profile.Isolation != sandbox.IsolationUnavailable {
					t.Errorf("profile isolation %q, want %q", st.Profile.Isolation, sandbox.IsolationUnavailable)
				}
				return
			}
			if !st.Ready || createErr != nil {
				t.Fatalf("status %+v, Create error %v: want ready", st, createErr)
			}
			defer sbx.Destroy(context.Background())
			if code, out, stderr := run(t, sbx, sh("echo ok")); code != 0 || out != "ok\n" {
				t.Errorf("command in an intact base: exit %d %q %s", code, out, stderr)
			}
		})
	}
}

func appendFile(t *testing.T, path, content string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkOpenBase is what verifying the managed base costs a worker once,
// when its driver starts: hashing every file of the base.
func BenchmarkOpenBase(b *testing.B) {
	for b.Loop() {
		if _, err := sandbox.OpenBase(sandboxtest.Base(), ""); err != nil {
			b.Fatal(err)
		}
	}
}
