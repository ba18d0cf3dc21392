package main

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cairnhq/cairn/e2e/devstack"
)

// maxStateBytes is the size of the large state: the 100,000,000-byte limit
// (scaled by -size).
const maxStateBytes = 100_000_000

// apiCall makes a JSON:API call with a bearer token and decodes the
// response into out.
func apiCall(c *http.Client, method, url, token string, body any, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/vnd.api+json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		_ = json.Unmarshal(raw, out)
	}
	return resp.StatusCode, nil
}

type svDocument struct {
	Data struct {
		ID         string         `json:"id"`
		Attributes map[string]any `json:"attributes"`
	} `json:"data"`
}

// benchStateTransfer uploads and downloads a 100 MB state through the
// remote-backend API and reports throughput and the API's peak RSS growth,
// next to the same bytes sent to an empty handler in this process.
func benchStateTransfer(api *apiProcess, token, org, baseURL string) error {
	stateBytes := sized(maxStateBytes)
	var ws svDocument
	if st, err := apiCall(api.Client, http.MethodPost, api.URL+"/api/v2/organizations/"+org+"/workspaces", token,
		map[string]any{"data": map[string]any{"type": "workspaces", "attributes": map[string]any{"name": "big-state"}}}, &ws); err != nil || st != http.StatusCreated {
		return fmt.Errorf("creating workspace: %d %v", st, err)
	}
	if st, err := apiCall(api.Client, http.MethodPost, api.URL+"/api/v2/workspaces/"+ws.Data.ID+"/actions/lock", token, nil, nil); err != nil || st != http.StatusOK {
		return fmt.Errorf("locking: %d %v", st, err)
	}
	sum, crc := md5.New(), crc32.New(castagnoli)
	_, _ = io.Copy(io.MultiWriter(sum, crc), devstack.SyntheticState(stateBytes))
	want := crc.Sum32()
	var sv svDocument
	if st, err := apiCall(api.Client, http.MethodPost, api.URL+"/api/v2/workspaces/"+ws.Data.ID+"/state-versions", token,
		map[string]any{"data": map[string]any{"type": "state-versions", "attributes": map[string]any{
			"serial": 1, "md5": hex.EncodeToString(sum.Sum(nil)), "lineage": "bench"}}}, &sv); err != nil || st != http.StatusCreated {
		return fmt.Errorf("creating state version: %d %v", st, err)
	}
	put := func(url string) (time.Duration, error) {
		req, _ := http.NewRequest(http.MethodPut, url, devstack.SyntheticState(stateBytes))
		req.ContentLength = int64(stateBytes)
		start := time.Now()
		resp, err := api.Client.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			return 0, fmt.Errorf("upload answered %d", resp.StatusCode)
		}
		return time.Since(start), nil
	}
	baseUpload, err := put(baseURL)
	if err != nil {
		return err
	}
	before := devstack.ReadRSS(api.PID)
	sampler := devstack.SampleRSS(api.PID)
	upload, err := put(sv.Data.Attributes["hosted-state-upload-url"].(string))
	peakUp := sampler.Stop()
	if err != nil {
		return err
	}
	var read svDocument
	if _, err := apiCall(api.Client, http.MethodGet, api.URL+"/api/v2/state-versions/"+sv.Data.ID, token, nil, &read); err != nil {
		return err
	}
	downloadURL, _ := read.Data.Attributes["hosted-state-download-url"].(string)
	sampler = devstack.SampleRSS(api.PID)
	req, _ := http.NewRequest(http.MethodGet, downloadURL, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	start := time.Now()
	resp, err := api.Client.Do(req)
	if err != nil {
		return err
	}
	// The body is checked with CRC-32C, which the CPU computes at many GB/s,
	// so that on two cores the check does not take its time from the server
	// being measured (an MD5 here runs at about the download's own speed).
	check := crc32.New(castagnoli)
	n, _ := io.Copy(check, resp.Body)
	resp.Body.Close()
	download := time.Since(start)
	peakDown := sampler.Stop()
	if n != int64(stateBytes) || check.Sum32() != want {
		return fmt.Errorf("downloaded %d bytes that do not match the upload", n)
	}
	mbps := func(d time.Duration) float64 { return float64(stateBytes) / 1e6 / d.Seconds() }
	fmt.Printf("%-44s %8.1f MB/s  (%s)  | vs empty handler %.1f MB/s: x%.2f  [target >= 100 MB/s]\n",
		fmt.Sprintf("PUT %d MB state (sealed, md5-verified)", stateBytes/1e6), mbps(upload), upload.Round(time.Millisecond), mbps(baseUpload), baseUpload.Seconds()/upload.Seconds())
	fmt.Printf("%-44s %8.1f MB/s  (%s)  [target >= 100 MB/s]\n", fmt.Sprintf("GET %d MB state (unsealed stream)", stateBytes/1e6), mbps(download), download.Round(time.Millisecond))
	fmt.Printf("%-44s upload +%.1f MiB, download +%.1f MiB over %.1f MiB  [target < 64 MiB]\n", "cairn-api peak RSS growth",
		float64(peakUp-before)/(1<<20), float64(peakDown-before)/(1<<20), float64(before)/(1<<20))
	return nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const benchConfig = `%s
variable "gen" {
  type    = number
  default = 0
}

resource "terraform_data" "r" {
  count = 50
  input = "value-${count.index}-${var.gen}"
}
`

// benchStateMode times init, plan and apply on 50 terraform_data resources
// with the cloud block against Cairn (state mode: the CLI runs, Cairn keeps
// the state), next to the same configuration with the local backend, for
// OpenTofu and Terraform in turn, and reports medians, the added
// milliseconds and the ratio.
func benchStateMode(ctx context.Context, api *apiProcess, tlsFiles devstack.TLSFiles, token, org string, rounds int) error {
	for _, cli := range []struct{ name, version string }{{"tofu", "1.10.6"}, {"terraform", "1.5.7"}} {
		bin, err := filepath.Abs(filepath.Join(devstack.ToolchainDir(".", cli.name, cli.version), cli.name))
		if err != nil {
			return err
		}
		if _, err := os.Stat(bin); err != nil {
			return fmt.Errorf("no %s in the toolchain mirror (run make tools): %w", cli.name, err)
		}
		if err := benchCLIStateMode(ctx, api, tlsFiles, token, org, rounds, cli.name, bin); err != nil {
			return err
		}
	}
	return nil
}

// benchCLIStateMode measures one CLI against its own workspace,
// <cli>-bench, the local and cloud rounds alternating.
func benchCLIStateMode(ctx context.Context, api *apiProcess, tlsFiles devstack.TLSFiles, token, org string, rounds int, cli, bin string) error {
	home, err := os.MkdirTemp("", "cairn-bench-home-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	rc := filepath.Join(home, "tofurc")
	if err := os.WriteFile(rc, []byte(fmt.Sprintf("credentials %q {\n  token = %q\n}\n", api.Host, token)), 0o600); err != nil {
		return err
	}
	env := append(os.Environ(), "HOME="+home, "TF_CLI_CONFIG_FILE="+rc, "SSL_CERT_FILE="+tlsFiles.Bundle,
		"TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1")
	// The workspace executes locally: the CLI runs, Cairn keeps the state
	// (a workspace the CLI created would run remotely, the organization's
	// default, and this bench starts no worker).
	workspace := cli + "-bench"
	body := fmt.Sprintf(`{"data":{"type":"workspaces","attributes":{"name":%q,"execution-mode":"local"}}}`, workspace)
	req, _ := http.NewRequest(http.MethodPost, api.URL+"/api/v2/organizations/"+org+"/workspaces", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/vnd.api+json")
	resp, err := api.Client.Do(req)
	if err != nil {
		return fmt.Errorf("creating workspace %s: %w", workspace, err)
	}
	var created svDocument
	err = json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || err != nil {
		return fmt.Errorf("creating workspace %s: %s %v", workspace, resp.Status, err)
	}
	// Fail here rather than let plan wait forever on a worker that does
	// not exist.
	if mode := created.Data.Attributes["execution-mode"]; mode != "local" {
		return fmt.Errorf("workspace %s was created with execution mode %v, not local", workspace, mode)
	}
	cloudBlock := fmt.Sprintf("terraform {\n  cloud {\n    hostname = %q\n    organization = %q\n    workspaces {\n      name = %q\n    }\n  }\n}\n", api.Host, org, workspace)
	timings := map[string][]time.Duration{}
	for round := 0; round < rounds; round++ {
		for _, backend := range []string{"local", "cloud"} {
			dir, err := os.MkdirTemp("", "cairn-bench-"+cli+"-")
			if err != nil {
				return err
			}
			block := ""
			if backend == "cloud" {
				block = cloudBlock
			}
			if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(fmt.Sprintf(benchConfig, block)), 0o644); err != nil {
				return err
			}
			if backend == "local" && round > 0 {
				// Carry local state across rounds, as the cloud keeps it.
				if prev, err := os.ReadFile(filepath.Join(home, "local.tfstate")); err == nil {
					_ = os.WriteFile(filepath.Join(dir, "terraform.tfstate"), prev, 0o644)
				}
			}
			gen := fmt.Sprintf("gen=%d", round+1)
			for _, step := range [][]string{{"init", "-no-color"}, {"plan", "-no-color", "-var", gen}, {"apply", "-no-color", "-auto-approve", "-var", gen}} {
				cmd := tool(ctx, bin, step...)
				cmd.Dir, cmd.Env = dir, env
				start := time.Now()
				if out, err := cmd.CombinedOutput(); err != nil {
					return fmt.Errorf("%s %s (%s): %v\n%s", cli, step[0], backend, err, out)
				}
				timings[backend+" "+step[0]] = append(timings[backend+" "+step[0]], time.Since(start))
			}
			if backend == "local" {
				if st, err := os.ReadFile(filepath.Join(dir, "terraform.tfstate")); err == nil {
					_ = os.WriteFile(filepath.Join(home, "local.tfstate"), st, 0o644)
				}
			}
			_ = os.RemoveAll(dir)
		}
	}
	median := func(ds []time.Duration) time.Duration {
		s := append([]time.Duration(nil), ds...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[len(s)/2]
	}
	for _, step := range []string{"init", "plan", "apply"} {
		local, cloud := median(timings["local "+step]), median(timings["cloud "+step])
		target := ""
		if step == "apply" {
			target = "  [target <= +25 ms]"
		}
		fmt.Printf("%-9s %-6s 50 resources, median of %d: local %7.1f ms, cloud %7.1f ms, added %+7.1f ms (x%.2f)%s\n",
			cli, step, rounds, ms64(local), ms64(cloud), ms64(cloud)-ms64(local), float64(cloud)/float64(local), target)
	}
	if cli == "tofu" {
		return benchCLIRequests(api, token, org, workspace, created.Data.ID, max(20, 20*rounds))
	}
	return nil
}

// benchCLIRequests times, one after another on a kept-alive connection, the
// requests with the CLI's own token that a state-mode apply makes besides
// its state's transfer: what the API adds to each command's round trips.
func benchCLIRequests(api *apiProcess, token, org, workspace, workspaceID string, n int) error {
	requests := []struct{ name, method, path, body string }{
		{"read workspace", http.MethodGet, "/api/v2/organizations/" + org + "/workspaces/" + workspace, ""},
		{"current state version", http.MethodGet, "/api/v2/workspaces/" + workspaceID + "/current-state-version", ""},
		{"lock", http.MethodPost, "/api/v2/workspaces/" + workspaceID + "/actions/lock", `{"reason":"bench"}`},
		{"unlock", http.MethodPost, "/api/v2/workspaces/" + workspaceID + "/actions/unlock", ""},
	}
	took := map[string][]float64{}
	for i := range n + 5 {
		for _, r := range requests {
			req, _ := http.NewRequest(r.method, api.URL+r.path, strings.NewReader(r.body))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/vnd.api+json")
			start := time.Now()
			resp, err := api.Client.Do(req)
			if err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s", r.name, resp.Status)
			}
			if i >= 5 { // the first few warm the connection and the statements
				took[r.name] = append(took[r.name], ms64(time.Since(start)))
			}
		}
	}
	fmt.Printf("  the CLI's /api/v2 requests with its user token, %d each in sequence:", n)
	for _, r := range requests {
		fmt.Printf(" %s p50 %.2f ms, p99 %.2f;", r.name, median(took[r.name]), percentile(took[r.name], 0.99))
	}
	fmt.Println()
	return nil
}

func ms64(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
