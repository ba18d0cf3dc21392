package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/cairnhq/cairn/e2e/devstack"
)

// startBFF runs the real cairn-bff against the API and waits for /health.
func startBFF(dbURL string, api *apiProcess, files devstack.TLSFiles) (string, func(), error) {
	port, err := devstack.FreePort()
	if err != nil {
		return "", nil, err
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	cmd := exec.Command(filepath.Join(envOr("CAIRN_BIN_DIR", "bin"), "cairn-bff"))
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "AUTH_SECRET=bench-auth-secret-0123456789abcdef0123456789abcdef",
		"CAIRN_PUBLIC_URL="+api.URL, "SSL_CERT_FILE="+files.Bundle, fmt.Sprintf("CAIRN_BFF_ADDR=127.0.0.1:%d", port),
		"CAIRN_DASHBOARD_URL="+base, "CAIRN_LOG_LEVEL="+envOr("CAIRN_BENCH_API_LOG", "warn"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	forget := track(cmd)
	stop := func() { defer forget(); _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM); _ = cmd.Wait() }
	for deadline := time.Now().Add(20 * time.Second); ; {
		if resp, err := http.Get(base + "/health"); err == nil {
			resp.Body.Close()
			return base, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("cairn-bff did not come up")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dashboardSession signs in through the dashboard's form and returns a
// client holding its session cookie.
func dashboardSession(base, email string) (*http.Client, error) {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(base + "/sign-in")
	if err != nil {
		return nil, err
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="csrf_token" value="([0-9a-f]+)"`).FindSubmatch(page)
	if m == nil {
		return nil, fmt.Errorf("no CSRF token on the sign-in page")
	}
	form := "csrf_token=" + string(m[1]) + "&email=" + strings.ReplaceAll(email, "@", "%40") + "&password=correct+horse+battery+staple"
	req, _ := http.NewRequest(http.MethodPost, base+"/sign-in", strings.NewReader(form))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	if resp, err = c.Do(req); err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		return nil, fmt.Errorf("dashboard sign-in: %d", resp.StatusCode)
	}
	return c, nil
}

// ttfb is the time until the first byte of a GET's response body.
func ttfb(c *http.Client, url string) (time.Duration, int, error) {
	start := time.Now()
	resp, err := c.Get(url)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	one := make([]byte, 1)
	_, _ = io.ReadFull(resp.Body, one)
	first := time.Since(start)
	_, _ = io.Copy(io.Discard, resp.Body)
	return first, resp.StatusCode, nil
}

// benchDashboard measures the run page's time to first byte for a run
// with 5,000 changed resources (against reading the same review from the
// API directly) and the live channel's latency from a log chunk's commit
// to its arrival at a client.
func benchDashboard(dbURL string, rounds int) error {
	m, err := startManagedStack(dbURL, "dash")
	if err != nil {
		return err
	}
	defer m.stop()
	base, stopBFF, err := startBFF(dbURL, m.api, m.files)
	if err != nil {
		return err
	}
	defer stopBFF()
	api, c, session, email := m.api, m.api.Client, m.session, m.email
	browser, err := dashboardSession(base, email)
	if err != nil {
		return err
	}
	startRun := func(count int) (string, error) {
		var cfg, created struct{ ID string }
		body := fmt.Sprintf("resource \"terraform_data\" \"item\" {\n  count = %d\n  input = { index = count.index }\n}\n", count)
		if _, err := v1(c, http.MethodPost, api.URL+"/v1/workspaces/"+m.workspace+"/configuration-versions", session,
			devstack.TarGz(map[string]string{"main.tf": body}), "application/gzip", &cfg); err != nil {
			return "", err
		}
		_, err := v1(c, http.MethodPost, api.URL+"/v1/runs", session, jsonBody(map[string]string{"workspace_id": m.workspace,
			"configuration_version_id": cfg.ID, "kind": "plan_only"}), "application/json", &created)
		return created.ID, err
	}
	waitDone := func(id string) error {
		for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			var r struct{ Status string }
			if _, err := v1(c, http.MethodGet, api.URL+"/v1/runs/"+id, session, nil, "", &r); err != nil {
				return err
			}
			if r.Status == "planned_and_finished" {
				return nil
			}
			if r.Status == "errored" || r.Status == "canceled" {
				return fmt.Errorf("run %s %s", id, r.Status)
			}
		}
		return fmt.Errorf("run %s did not finish", id)
	}

	// Live channel latency: a socket opened right after creation receives
	// each chunk as the runner commits it.
	var latencies []float64
	for round := 0; round <= rounds; round++ {
		id, err := startRun(50 + round)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		conn, _, err := websocket.Dial(ctx, strings.Replace(base, "http", "ws", 1)+"/live/runs/"+id,
			&websocket.DialOptions{HTTPClient: browser, HTTPHeader: http.Header{"Origin": {base}}})
		if err != nil {
			cancel()
			return fmt.Errorf("opening the live channel: %w", err)
		}
		for {
			var ev struct {
				Type      string     `json:"type"`
				CreatedAt *time.Time `json:"created_at"`
			}
			if err := wsjson.Read(ctx, conn, &ev); err != nil {
				break
			}
			if ev.Type == "log" && ev.CreatedAt != nil && round > 0 {
				latencies = append(latencies, ms64(time.Since(*ev.CreatedAt)))
			}
		}
		conn.CloseNow()
		cancel()
		if err := waitDone(id); err != nil {
			return err
		}
	}

	// Run page and Changes tab time to first byte with 5,000 changed
	// resources, against a 10-change run measured in the same rounds.
	big, err := startRun(sized(5000))
	if err != nil {
		return err
	}
	small, err := startRun(10)
	if err != nil {
		return err
	}
	for _, id := range []string{big, small} {
		if err := waitDone(id); err != nil {
			return err
		}
	}
	var page, changes, direct, smallPage, smallChanges []float64
	for round := 0; round <= rounds; round++ {
		measured := make([]float64, 4)
		for i, u := range []string{"/runs/" + big, "/runs/" + big + "/changes", "/runs/" + small, "/runs/" + small + "/changes"} {
			d, st, err := ttfb(browser, base+u)
			if err != nil || st != http.StatusOK {
				return fmt.Errorf("%s: %d %v", u, st, err)
			}
			measured[i] = ms64(d)
		}
		start := time.Now()
		if _, err := v1(c, http.MethodGet, api.URL+"/v1/runs/"+big, session, nil, "", nil); err != nil {
			return err
		}
		if round > 0 {
			page, changes, direct = append(page, measured[0]), append(changes, measured[1]), append(direct, ms64(time.Since(start)))
			smallPage, smallChanges = append(smallPage, measured[2]), append(smallChanges, measured[3])
		}
	}
	fmt.Printf("dashboard, median of %d rounds:\n", rounds)
	fmt.Printf("  run page TTFB, 5,000 changed resources %7.1f ms  (the API's run review alone %6.1f ms, x%.2f)\n",
		median(page), median(direct), median(page)/median(direct))
	fmt.Printf("  Changes tab TTFB, 5,000 changed resources %7.1f ms  (10 changes %6.1f ms, x%.2f)\n",
		median(changes), median(smallChanges), median(changes)/median(smallChanges))
	fmt.Printf("  run page TTFB, 10 changed resources      %7.1f ms  (5,000 changes x%.2f)\n", median(smallPage), median(page)/median(smallPage))
	fmt.Printf("  live channel, chunk commit -> client, %d chunks: p50 %.1f ms [target < 500 ms], p99 %.1f ms\n",
		len(latencies), percentile(latencies, 0.5), percentile(latencies, 0.99))
	return nil
}
