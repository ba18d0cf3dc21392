package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tofuBinary is the checksum-verified OpenTofu of the toolchain mirror.
func tofuBinary(t *testing.T) string {
	t.Helper()
	return toolchainBinary(t, "tofu", "1.10.6")
}

// member is a signed-up person with an organization and an API token.
type member struct {
	email   string
	session string
	orgID   string
	slug    string
	token   string
}

func (s *Stack) apiJSON(t *testing.T, method, path string, body any, out any, header ...string) int {
	t.Helper()
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	status, answer := call(t, s.Client, method, s.APIURL+path, raw, header...)
	if out != nil && status < 300 {
		var env struct {
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(answer, &env); err != nil {
			t.Fatalf("%s %s: %s", method, path, answer)
		}
		if err := json.Unmarshal(env.Data, out); err != nil {
			t.Fatalf("%s %s: %s", method, path, answer)
		}
	}
	return status
}

// newMember signs up, creates an organization and issues a user API token;
// the stack's public gate is open.
func (s *Stack) newMember(t *testing.T, name string) member {
	t.Helper()
	var in struct{ Token string }
	email := fmt.Sprintf("%s-%d@example.com", name, time.Now().UnixNano())
	if st := s.apiJSON(t, http.MethodPost, "/api/auth/sign-up/email",
		map[string]string{"email": email, "password": "correct horse battery staple", "name": name}, &in); st != http.StatusOK {
		t.Fatalf("sign-up: %d", st)
	}
	m := member{email: email, session: in.Token, slug: fmt.Sprintf("%s-%d", name, time.Now().UnixNano()%1_000_000)}
	cookie := []string{"Cookie", "__Secure-identity.session_token=" + m.session}
	var org struct{ ID string }
	if st := s.apiJSON(t, http.MethodPost, "/api/auth/organization/create", map[string]string{"name": name, "slug": m.slug}, &org, cookie...); st != http.StatusOK {
		t.Fatalf("organization: %d", st)
	}
	m.orgID = org.ID
	var tok struct{ Token string }
	if st := s.apiJSON(t, http.MethodPost, "/v1/user-tokens", map[string]string{"description": "tofu"}, &tok,
		append(cookie, "Idempotency-Key", "token-"+m.slug)...); st != http.StatusCreated {
		t.Fatalf("user token: %d", st)
	}
	m.token = tok.Token
	return m
}

// tofuRun is one OpenTofu invocation in a working directory.
type tofuRun struct {
	bin string
	dir string
	env []string
}

func (r tofuRun) command(args ...string) *exec.Cmd {
	cmd := exec.Command(r.bin, args...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), r.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

func (r tofuRun) run(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	cmd := r.command(args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("tofu %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

func (r tofuRun) fail(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	cmd := r.command(args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err == nil {
		t.Fatalf("tofu %s succeeded, want failure:\n%s", strings.Join(args, " "), out.String())
	}
	return out.String()
}

const cloudConfig = `terraform {
  cloud {
    hostname     = %q
    organization = %q
    workspaces {
      name = "demo"
    }
  }
}

variable "n" {
  type    = number
  default = 1
}

variable "slow" {
  type    = bool
  default = false
}

resource "terraform_data" "item" {
  count = var.n
  input = "item-${count.index}"
}

resource "terraform_data" "slow" {
  count = var.slow ? 1 : 0
  provisioner "local-exec" {
    command = "sleep 60"
  }
}

output "names" {
  value = terraform_data.item[*].output
}

output "secret" {
  value     = "s3cr3t-value"
  sensitive = true
}
`

// newTofuDir writes the configuration and a CLI config holding the token.
func newTofuDir(t *testing.T, s *Stack, m member) tofuRun {
	t.Helper()
	dir := t.TempDir()
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(fmt.Sprintf(cloudConfig, s.APIHost, m.slug)), 0o644); err != nil {
		t.Fatal(err)
	}
	rc := filepath.Join(home, "tofurc")
	if err := os.WriteFile(rc, []byte(fmt.Sprintf("credentials %q {\n  token = %q\n}\n", s.APIHost, m.token)), 0o600); err != nil {
		t.Fatal(err)
	}
	return tofuRun{bin: tofuBinary(t), dir: dir, env: []string{
		"HOME=" + home, "TF_CLI_CONFIG_FILE=" + rc, "SSL_CERT_FILE=" + s.TLS.Bundle,
		"TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1", "TF_LOG=",
	}}
}

// TestTofuCloudBlockKeepsStateInCairn drives the real OpenTofu CLI with a
// cloud block against the real binaries: init creates the workspace,
// applies publish state versions, state and outputs read back, a second
// apply fails on the lock, force-unlock recovers, and another organization
// sees nothing.
func TestTofuCloudBlockKeepsStateInCairn(t *testing.T) {
	t.Parallel()
	s := StartStack(t, WithTLS())
	m := s.newMember(t, "tofu")
	tf := newTofuDir(t, s, m)

	tf.run(t, "init")
	var ws struct{ ID string }
	auth := []string{"Authorization", "Bearer " + m.token}
	if st, body := call(t, s.Client, http.MethodGet, s.APIURL+"/api/v2/organizations/"+m.slug+"/workspaces/demo", nil, auth...); st != http.StatusOK {
		t.Fatalf("init did not create the workspace: %d %s", st, body)
	} else {
		var doc struct{ Data struct{ ID string } }
		_ = json.Unmarshal(body, &doc)
		ws.ID = doc.Data.ID
	}
	// Workspaces the CLI creates run remotely by default (the
	// organization's default_execution_mode); this test keeps execution
	// local and only the state in Cairn.
	if st, body := call(t, s.Client, http.MethodPatch, s.APIURL+"/api/v2/organizations/"+m.slug+"/workspaces/demo",
		[]byte(`{"data":{"type":"workspaces","attributes":{"execution-mode":"local"}}}`), append(auth, "Content-Type", "application/vnd.api+json")...); st != http.StatusOK {
		t.Fatalf("switching to local execution: %d %s", st, body)
	}

	tf.run(t, "apply", "-auto-approve")
	tf.run(t, "apply", "-auto-approve", "-var", "n=3")
	list := tf.run(t, "state", "list")
	for _, addr := range []string{"terraform_data.item[0]", "terraform_data.item[1]", "terraform_data.item[2]"} {
		if !strings.Contains(list, addr) {
			t.Fatalf("state list lacks %s:\n%s", addr, list)
		}
	}
	var outputs map[string]struct {
		Value     any  `json:"value"`
		Sensitive bool `json:"sensitive"`
	}
	if err := json.Unmarshal([]byte(tf.run(t, "output", "-json")), &outputs); err != nil {
		t.Fatal(err)
	}
	if names, _ := outputs["names"].Value.([]any); len(names) != 3 || names[2] != "item-2" || !outputs["secret"].Sensitive {
		t.Fatalf("outputs %+v", outputs)
	}
	if secret := tf.run(t, "output", "-raw", "secret"); secret != "s3cr3t-value" {
		t.Fatalf("output -raw secret = %q", secret)
	}

	cookie := []string{"Cookie", "__Secure-identity.session_token=" + m.session}
	var history []struct {
		Number int   `json:"number"`
		Serial int64 `json:"serial"`
	}
	if st := s.apiJSON(t, http.MethodGet, "/v1/workspaces/"+ws.ID+"/state-versions", nil, &history, cookie...); st != http.StatusOK || len(history) != 2 {
		t.Fatalf("state history %d %+v", st, history)
	}
	if history[0].Number != 2 || history[1].Number != 1 || history[0].Serial <= history[1].Serial {
		t.Fatalf("history not numbered newest first with growing serials: %+v", history)
	}

	// A slow apply holds the lock; a second apply fails on it.
	slow := tf.command("apply", "-auto-approve", "-var", "n=3", "-var", "slow=true")
	var slowOut bytes.Buffer
	slow.Stdout, slow.Stderr = &slowOut, &slowOut
	if err := slow.Start(); err != nil {
		t.Fatal(err)
	}
	waitForLock(t, s, m, ws.ID, true)
	if out := tf.fail(t, "apply", "-auto-approve", "-var", "n=3"); !strings.Contains(out, "workspace already locked") {
		t.Fatalf("second apply did not fail on the lock:\n%s", out)
	}
	// The holder dies without unlocking; force-unlock recovers.
	_ = syscall.Kill(-slow.Process.Pid, syscall.SIGKILL)
	_ = slow.Wait()
	if out := tf.run(t, "force-unlock", "-force", m.slug+"/demo"); !strings.Contains(out, "successfully unlocked") {
		t.Fatalf("force-unlock said:\n%s", out)
	}
	waitForLock(t, s, m, ws.ID, false)
	tf.run(t, "apply", "-auto-approve", "-var", "n=2")

	// Another organization's token sees the same 404 as for nothing at all.
	other := s.newMember(t, "other")
	foreign := []string{"Authorization", "Bearer " + other.token}
	for _, path := range []string{"/api/v2/organizations/" + m.slug + "/workspaces/demo", "/api/v2/workspaces/" + ws.ID, "/api/v2/workspaces/" + ws.ID + "/current-state-version"} {
		if st, body := call(t, s.Client, http.MethodGet, s.APIURL+path, nil, foreign...); st != http.StatusNotFound {
			t.Fatalf("%s with another organization's token: %d %s", path, st, body)
		}
	}
	if strings.Contains(s.Logs(), "s3cr3t-value") || strings.Contains(s.Logs(), m.token) {
		t.Fatal("process logs carry a secret")
	}
}

func waitForLock(t *testing.T, s *Stack, m member, workspaceID string, locked bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		_, body := call(t, s.Client, http.MethodGet, s.APIURL+"/api/v2/workspaces/"+workspaceID, nil, "Authorization", "Bearer "+m.token)
		var doc struct {
			Data struct {
				Attributes struct {
					Locked bool `json:"locked"`
				} `json:"attributes"`
			} `json:"data"`
		}
		if json.Unmarshal(body, &doc) == nil && doc.Data.Attributes.Locked == locked {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("workspace lock never became %v", locked)
}
