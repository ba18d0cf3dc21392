package devstack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
)

// OpenPublicGate writes the first launch-control version, with the public
// gate open, through the operator API. Harnesses that create organizations
// on the fly (go-tfe's tests, benchmarks) need it.
func OpenPublicGate(client *http.Client, apiURL, operatorToken, key string) error {
	doc := map[string]any{
		"expected_version": 0,
		"reason":           "test harness: " + key,
		"document": map[string]any{
			"public_gate": true, "launched_organizations": []string{}, "canary_allowlist": []any{},
			"new_runs_enabled": true, "applies_enabled": true,
			"federation_providers": map[string]bool{"aws": false, "gcp": false, "azure": false},
			"regions":              map[string]bool{"us": true, "eu": false},
			"ceilings":             map[string]any{"sandboxes_per_region": map[string]int{"us": 4, "eu": 0}, "pending_runs_per_workspace": 50},
			"runner_releases":      []string{"cairn-runner-1"}, "policy_releases": []string{"opa-1.18.2"},
			"workflow_routing": map[string]string{"run": "default"},
		},
	}
	raw, _ := json.Marshal(doc)
	req, err := http.NewRequest(http.MethodPut, apiURL+"/operator/v1/launch-control", bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("opening the launch gate: %d", resp.StatusCode)
	}
	return nil
}
