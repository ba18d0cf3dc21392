package devstack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/cairnhq/cairn/api/launch"
)

// OpenPublicGate writes the first launch-control version, the default
// control with the public gate open, through the operator API, as `make
// run` does for a fresh installation. Harnesses that create organizations
// on the fly (go-tfe's tests, benchmarks, end-to-end stacks) need it.
func OpenPublicGate(client *http.Client, apiURL, operatorToken, key string) error {
	open := launch.Default()
	open.PublicGate = true
	return WriteFirstLaunchControl(client, apiURL, operatorToken, key, open)
}

// WriteFirstLaunchControl writes control as the installation's first
// launch-control version, for a harness that needs other settings than the
// default ones (a benchmark's regional sandbox ceiling).
func WriteFirstLaunchControl(client *http.Client, apiURL, operatorToken, key string, control launch.Control) error {
	raw, _ := json.Marshal(map[string]any{"expected_version": 0, "reason": "test harness: " + key, "document": control})
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
		return fmt.Errorf("writing the launch control: %d", resp.StatusCode)
	}
	return nil
}
