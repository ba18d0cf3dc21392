package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/security"
	"github.com/chromedp/chromedp"
)

// TestTofuLogin runs the real `tofu login`, and then `terraform login`,
// against the stack: the CLI reads login.v1, prints the authorization URL
// and waits on its loopback port; Chromium opens that URL, signs in on the
// dashboard it is sent to and allows the CLI on the consent screen; the
// CLI exchanges the code and writes credentials.tfrc.json. With that file
// alone, `init` and `plan` work with a cloud block.
func TestTofuLogin(t *testing.T) {
	t.Parallel()
	s := StartStack(t, WithTLS())
	// In turn, each with its own member, home and browser.
	t.Run("tofu", func(t *testing.T) { cliLogin(t, s, tofuBinary(t)) })
	t.Run("terraform", func(t *testing.T) { cliLogin(t, s, terraformBinary(t)) })
}

// cliLogin logs one CLI in through the browser and plans with what it stored.
func cliLogin(t *testing.T, s *Stack, cli string) {
	m := s.newMember(t, "login")

	// HOME is the CLI's configuration directory (~/.terraform.d, where
	// tofu login writes credentials.tfrc.json) and holds no other CLI
	// configuration: TF_CLI_CONFIG_FILE stays unset, since with it the CLI
	// never reads that directory. No browser opens by itself (xdg-open
	// fails), so the CLI prints the URL to open.
	home := t.TempDir()
	bin := filepath.Join(home, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "xdg-open"), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Terraform 1.5.7 writes its credentials file into ~/.terraform.d but
	// does not create that directory (tofu does): a Terraform user has it
	// from earlier use, this fresh home needs it made.
	if filepath.Base(cli) == "terraform" {
		if err := os.MkdirAll(filepath.Join(home, ".terraform.d"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"HOME=" + home, "TF_CLI_CONFIG_FILE=", "XDG_CONFIG_HOME=", "SSL_CERT_FILE=" + s.TLS.Bundle, "CHECKPOINT_DISABLE=1", "TF_LOG="}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	login := exec.CommandContext(ctx, cli, "login", s.APIHost)
	login.Dir = home
	login.Env = append(os.Environ(), append(env, "PATH="+bin, "BROWSER=")...)
	login.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	login.Stdin = strings.NewReader("yes\n")
	stdout, err := login.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	output := &syncBuffer{}
	login.Stderr = output
	if err := login.Start(); err != nil {
		t.Fatal(err)
	}
	urls := make(chan string, 1)
	go func() {
		pattern := regexp.MustCompile(`https://\S+/api/auth/oauth2/authorize\?\S+`)
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			_, _ = output.Write([]byte(scanner.Text() + "\n"))
			if u := pattern.FindString(scanner.Text()); u != "" {
				urls <- u
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var authorizeURL string
	select {
	case authorizeURL = <-urls:
	case <-time.After(time.Minute):
		t.Fatalf("login printed no authorization URL:\n%s", output.String())
	}
	if !strings.Contains(authorizeURL, "client_id=terraform-cli") || !strings.Contains(authorizeURL, "code_challenge_method=S256") ||
		!regexp.MustCompile(`redirect_uri=http%3A%2F%2Flocalhost%3A100(0[0-9]|10)%2Flogin`).MatchString(authorizeURL) {
		t.Fatalf("authorization URL %s", authorizeURL)
	}

	browserCtx := newBrowser(t)
	browse(t, browserCtx, "trusting the stack's test CA", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, security.SetIgnoreCertificateErrors, security.SetIgnoreCertificateErrorsParams{Ignore: true})
		return err
	}))
	browse(t, browserCtx, "opening the CLI's authorization URL",
		chromedp.Navigate(authorizeURL),
		chromedp.WaitVisible(chromedp.CSS("#password")),
		chromedp.SendKeys(chromedp.CSS("#email"), m.email),
		chromedp.SendKeys(chromedp.CSS("#password"), "correct horse battery staple"),
		chromedp.Submit(chromedp.CSS("#password")),
		chromedp.WaitVisible(chromedp.CSS("#allow-agent")),
	)
	page, err := chromedp.Run(browserCtx, chromedp.Text(chromedp.CSS("body")))
	if err != nil || !strings.Contains(page, "OpenTofu/Terraform CLI on this computer") || !strings.Contains(page, "tfe:api") {
		t.Fatalf("consent page (%v):\n%s", err, page)
	}
	screenshot(t, browserCtx, filepath.Base(cli)+"-login-consent")
	browse(t, browserCtx, "allowing the CLI", chromedp.Click(chromedp.CSS("#allow-agent")))

	done := make(chan error, 1)
	go func() { done <- login.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s login: %v\n%s", filepath.Base(cli), err, output.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("login did not finish:\n%s", output.String())
	}

	// The CLI stored one credential for the host: a new user token.
	raw, err := os.ReadFile(filepath.Join(home, ".terraform.d", "credentials.tfrc.json"))
	if err != nil {
		t.Fatalf("no credentials.tfrc.json: %v\n%s", err, output.String())
	}
	var creds struct {
		Credentials map[string]struct {
			Token string `json:"token"`
		} `json:"credentials"`
	}
	if err := json.Unmarshal(raw, &creds); err != nil {
		t.Fatal(err)
	}
	token := creds.Credentials[s.APIHost].Token
	if !strings.HasPrefix(token, "cut_") || token == m.token {
		t.Fatalf("stored credentials %s", raw)
	}
	auth := []string{"Authorization", "Bearer " + token}
	if st, body := call(t, s.Client, http.MethodGet, s.APIURL+"/api/v2/account/details", nil, auth...); st != http.StatusOK ||
		!strings.Contains(string(body), m.email) {
		t.Fatalf("account details with the new token: %d %s", st, body)
	}

	// The cloud block works with what tofu login stored and nothing else.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(fmt.Sprintf(cloudConfig, s.APIHost, m.slug)), 0o644); err != nil {
		t.Fatal(err)
	}
	tf := tofuRun{bin: cli, dir: dir, env: append(env, "TF_IN_AUTOMATION=1", "TF_INPUT=0")}
	tf.run(t, "init")
	if st, body := call(t, s.Client, http.MethodPatch, s.APIURL+"/api/v2/organizations/"+m.slug+"/workspaces/demo",
		[]byte(`{"data":{"type":"workspaces","attributes":{"execution-mode":"local"}}}`), append(auth, "Content-Type", "application/vnd.api+json")...); st != http.StatusOK {
		t.Fatalf("init did not create the workspace, or the token cannot change it: %d %s", st, body)
	}
	if plan := tf.run(t, "plan", "-no-color"); !strings.Contains(plan, "terraform_data.item[0] will be created") {
		t.Fatalf("plan:\n%s", plan)
	}
}
