package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runnableMarker goes on the line before a README block that
// TestReadmeRunnableBlocks runs.
const runnableMarker = "<!-- runnable -->"

// runnableBlocks returns the bodies of the fenced shell blocks that follow
// the runnable marker, in order.
func runnableBlocks(t *testing.T, readme string) []string {
	t.Helper()
	var blocks []string
	lines := strings.Split(readme, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != runnableMarker {
			continue
		}
		if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "```sh" {
			t.Fatalf("README.md:%d: %s must be followed by a ```sh block", i+1, runnableMarker)
		}
		var body []string
		j := i + 2
		for ; j < len(lines) && strings.TrimSpace(lines[j]) != "```"; j++ {
			body = append(body, lines[j])
		}
		if j == len(lines) {
			t.Fatalf("README.md:%d: the runnable block never ends", i+1)
		}
		blocks = append(blocks, strings.Join(body, "\n"))
		i = j
	}
	return blocks
}

// TestReadmeRunnableBlocks runs the README's blocks marked runnable, in
// order and in one shell as a reader's terminal would, against a real
// stack laid out as `make run` leaves a clone: .data/tofurc with a token,
// .data/tls/bundle.pem, and .tools with the pinned OpenTofu. The only
// changes are the stack's address for localhost:8080 and its organization
// for `local`.
func TestReadmeRunnableBlocks(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := runnableBlocks(t, string(readme))
	// The tour's CLI block and its API block; fewer means a marker was lost.
	if len(blocks) < 2 {
		t.Fatalf("README.md marks %d blocks runnable, want the CLI block and the API block", len(blocks))
	}
	// The worker runs the plan with the same checksum-verified tofu the
	// blocks call from .tools.
	s := runsStack(t)
	m, password := readmeOwner(t, s)

	// A clone after `make run`, without the rest of the repository.
	clone := t.TempDir()
	if err := os.MkdirAll(filepath.Join(clone, ".data", "tls"), 0o755); err != nil {
		t.Fatal(err)
	}
	bundle, err := os.ReadFile(s.TLS.Bundle)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(clone, ".data", "tls", "bundle.pem"), bundle, 0o644); err != nil {
		t.Fatal(err)
	}
	// What cairn-api bootstrap writes for the local owner.
	rc := fmt.Sprintf("credentials %q {\n  token = %q\n}\n", s.APIHost, m.token)
	if err := os.WriteFile(filepath.Join(clone, ".data", "tofurc"), []byte(rc), 0o600); err != nil {
		t.Fatal(err)
	}
	// What cairn-api bootstrap writes next to it: the owner's sign-in.
	creds := fmt.Sprintf("email=%s\npassword=%s\norganization=%s\n", m.email, password, m.slug)
	if err := os.WriteFile(filepath.Join(clone, ".data", "dev-credentials"), []byte(creds), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(repoRoot(t), ".tools"), filepath.Join(clone, ".tools")); err != nil {
		t.Fatal(err)
	}

	script := strings.Join(blocks, "\n")
	for from, to := range map[string]string{
		"localhost:8080":         s.APIHost,
		`organization = "local"`: fmt.Sprintf("organization = %q", m.slug),
	} {
		if !strings.Contains(script, from) {
			t.Fatalf("the runnable blocks no longer name %s; update this test with the README", from)
		}
		script = strings.ReplaceAll(script, from, to)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = clone
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1",
		"TF_CLI_CONFIG_FILE=", "SSL_CERT_FILE=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("the README's runnable blocks failed: %v\n%s\n--- stack logs ---\n%s", err, out.String(), s.Logs())
	}
	// tofu colours its output; the checks read the text.
	got := regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(out.String(), "")
	for _, want := range []string{
		"Cloud backend has been successfully initialized", // tofu init with the cloud block
		"Plan: 1 to add, 0 to change, 0 to destroy",       // the remote plan, run by the worker
		`"data":[`,        // GET /v1/workspaces answered a list
		`"name":"demo"`,   // holding the workspace tofu init created
		`"openapi": "3.1`, // the contract, saved by the block
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the blocks' output lacks %q:\n%s", want, got)
		}
	}
}

// readmeOwner signs up the person the README's blocks act as, with a
// password shaped like the one cairn-api bootstrap generates (base64url),
// since the blocks read it from a dev-credentials file as bootstrap writes
// it; it gives them an organization and a user token, as bootstrap does.
func readmeOwner(t *testing.T, s *Stack) (member, string) {
	t.Helper()
	password := "Rm9yIHRoZSBSRUFETUUgb25seQ_x"
	m := member{email: fmt.Sprintf("readme-%d@example.com", time.Now().UnixNano()),
		slug: fmt.Sprintf("readme-%d", time.Now().UnixNano()%1_000_000)}
	var in struct{ Token string }
	if st := s.apiJSON(t, http.MethodPost, "/api/auth/sign-up/email",
		map[string]string{"email": m.email, "password": password, "name": "Readme"}, &in); st != http.StatusOK {
		t.Fatalf("sign-up: %d", st)
	}
	m.session = in.Token
	cookie := []string{"Cookie", "__Secure-identity.session_token=" + m.session}
	var org struct{ ID string }
	if st := s.apiJSON(t, http.MethodPost, "/api/auth/organization/create", map[string]string{"name": "Readme", "slug": m.slug}, &org, cookie...); st != http.StatusOK {
		t.Fatalf("organization: %d", st)
	}
	m.orgID = org.ID
	var tok struct{ Token string }
	if st := s.apiJSON(t, http.MethodPost, "/v1/user-tokens", map[string]string{"description": "make run: local OpenTofu CLI"}, &tok,
		append(cookie, "Idempotency-Key", "token-"+m.slug)...); st != http.StatusCreated {
		t.Fatalf("user token: %d", st)
	}
	m.token = tok.Token
	return m, password
}
