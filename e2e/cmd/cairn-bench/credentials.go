package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/cairnhq/cairn/e2e/devstack"
)

// benchCredentials measures what credentials add to a phase: issuing the
// attempt's handle in the sandbox-create intent, and redeeming it inside
// sandbox start (one generic secret unsealed, one AWS token minted and laid
// out), from the timings each plan attempt records.
func benchCredentials(dbURL string, rounds int) error {
	m, err := startManagedStack(dbURL, "credentials")
	if err != nil {
		return err
	}
	defer m.stop()
	api, c, session := m.api, m.api.Client, m.session
	if err := enableFederation(c, api.URL); err != nil {
		return err
	}
	for provider, configuration := range map[string]any{
		"generic_secret": map[string]any{"environment": map[string]string{"TF_VAR_token": "bench-secret-value"}},
		"aws":            map[string]string{"role_arn": "arn:aws:iam::123456789012:role/bench"},
	} {
		var p, v struct{ ID string }
		if _, err := v1(c, http.MethodPost, api.URL+"/v1/workspaces/"+m.workspace+"/credential-profiles", session,
			jsonBody(map[string]string{"provider": provider}), "application/json", &p); err != nil {
			return err
		}
		if _, err := v1(c, http.MethodPost, api.URL+"/v1/credential-profiles/"+p.ID+"/versions", session,
			jsonBody(map[string]any{"phase": "plan_and_apply", "configuration": configuration}), "application/json", &v); err != nil {
			return err
		}
		if _, err := v1(c, http.MethodPost, api.URL+"/v1/credential-profiles/"+p.ID+"/versions/"+v.ID+"/actions/verify", session,
			nil, "", nil); err != nil {
			return err
		}
	}
	var cfg struct{ ID string }
	if _, err := v1(c, http.MethodPost, api.URL+"/v1/workspaces/"+m.workspace+"/configuration-versions", session,
		devstack.TarGz(map[string]string{"main.tf": "variable \"token\" {\n  sensitive = true\n}\n"}), "application/gzip", &cfg); err != nil {
		return err
	}
	var issue, redeem []float64
	for round := 0; round <= rounds*4; round++ {
		var created benchRun
		if _, err := v1(c, http.MethodPost, api.URL+"/v1/runs", session, jsonBody(map[string]string{"workspace_id": m.workspace,
			"configuration_version_id": cfg.ID, "kind": "plan_only"}), "application/json", &created); err != nil {
			return err
		}
		deadline := time.Now().Add(2 * time.Minute)
		var r benchRun
		for {
			if _, err := v1(c, http.MethodGet, api.URL+"/v1/runs/"+created.ID, session, nil, "", &r); err != nil {
				return err
			}
			if r.Status == "planned_and_finished" {
				break
			}
			if time.Now().After(deadline) || (r.Status != "pending" && r.Status != "plan_queued" && r.Status != "planning") {
				return fmt.Errorf("run %s is %s", r.ID, r.Status)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if round == 0 {
			continue // warm-up: the first signing key is created on first need
		}
		for _, a := range r.Evidence.Attempts {
			issue = append(issue, a.TimingsMS["credential_issue"])
			redeem = append(redeem, a.TimingsMS["credential_redeem"])
		}
	}
	added := make([]float64, len(issue))
	for i := range issue {
		added[i] = issue[i] + redeem[i]
	}
	fmt.Printf("credentials per phase (1 generic secret + 1 AWS federation), %d plans:\n", len(added))
	if os.Getenv("CAIRN_BENCH_VERBOSE") != "" {
		fmt.Println("  redeem ms:", redeem)
	}
	fmt.Printf("  issue (sandbox-create intent)  p50 %6.2f ms  p99 %6.2f ms\n", percentile(issue, 0.5), percentile(issue, 0.99))
	fmt.Printf("  redeem + unseal + mint + lay out p50 %6.2f ms  p99 %6.2f ms\n", percentile(redeem, 0.5), percentile(redeem, 0.99))
	fmt.Printf("  added to the phase             p50 %6.2f ms  p99 %6.2f ms  [target p99 < 20 ms]\n", percentile(added, 0.5), percentile(added, 0.99))
	return nil
}

// enableFederation switches the federation providers on in a new version
// of the launch control.
func enableFederation(c *http.Client, apiURL string) error {
	return changeLaunchControl(c, apiURL, "bench: federation on", func(doc map[string]any) error {
		doc["federation_providers"] = map[string]bool{"aws": true, "gcp": true, "azure": true}
		return nil
	})
}

// changeLaunchControl writes a new version of the launch control through
// the operator API: the one in force, as change leaves it.
func changeLaunchControl(c *http.Client, apiURL, reason string, change func(doc map[string]any) error) error {
	op := func(method string, body []byte) (*http.Response, error) {
		req, _ := http.NewRequest(method, apiURL+"/operator/v1/launch-control", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+benchOperatorToken)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", fmt.Sprintf("bench-control-%d", time.Now().UnixNano()))
		}
		return c.Do(req)
	}
	resp, err := op(http.MethodGet, nil)
	if err != nil {
		return err
	}
	var cur struct {
		Data struct {
			Version  int            `json:"version"`
			Document map[string]any `json:"document"`
		} `json:"data"`
	}
	err = json.NewDecoder(resp.Body).Decode(&cur)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if err := change(cur.Data.Document); err != nil {
		return err
	}
	resp, err = op(http.MethodPut, jsonBody(map[string]any{"expected_version": cur.Data.Version, "reason": reason,
		"document": cur.Data.Document}))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %d %s", reason, resp.StatusCode, raw)
	}
	return nil
}
