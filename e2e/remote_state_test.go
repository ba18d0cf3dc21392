package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jmoiron/sqlx"
)

// remoteStateProducerConfig publishes the output consumers read.
const remoteStateProducerConfig = `output "vpc_id" {
  value = "vpc-0a1b2c3d"
}
`

// remoteStateConsumerConfig reads the producer's outputs with terraform_remote_state
// through the remote backend, as a managed run's sandboxed CLI does with
// its own run token, and republishes one as its own output.
const remoteStateConsumerConfig = `data "terraform_remote_state" "network" {
  backend = "remote"
  config = {
    hostname     = %q
    organization = %q
    workspaces = {
      name = "network"
    }
  }
}

output "network_vpc" {
  value = data.terraform_remote_state.network.outputs.vpc_id
}
`

// TestRemoteStateIsSharedOnlyWithListedConsumers drives managed runs with
// the real tofu CLI: workspace network applies an output; app's run reading
// it with terraform_remote_state fails (its run token finds no such
// workspace) until network lists app as a consumer, then the value reaches
// app's own output; ops, not listed, still fails.
func TestRemoteStateIsSharedOnlyWithListedConsumers(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	alice := s.newMember(t, "alice")
	network := s.createWorkspace(t, alice, "network", "us")
	app := s.createWorkspace(t, alice, "app", "us")
	ops := s.createWorkspace(t, alice, "ops", "us")

	cfg := s.uploadConfiguration(t, alice, network, map[string]string{"main.tf": remoteStateProducerConfig})
	_, applied := s.createRun(t, alice, network, cfg, "plan_and_apply")
	s.approveAndWait(t, alice, s.waitRun(t, alice, applied.ID, 2*time.Minute, status("awaiting_approval")))

	consumer := map[string]string{"main.tf": fmt.Sprintf(remoteStateConsumerConfig, s.APIHost, alice.slug)}
	appCfg := s.uploadConfiguration(t, alice, app, consumer)
	opsCfg := s.uploadConfiguration(t, alice, ops, consumer)

	// refused plans a consumer run that must fail: its token does not
	// find the producer, and may not create one of that name either.
	refused := func(when, workspaceID, cfgID string) {
		t.Helper()
		_, r := s.createRun(t, alice, workspaceID, cfgID, "plan_and_apply")
		r = s.waitRun(t, alice, r.ID, 2*time.Minute, status("errored", "awaiting_approval"))
		logs := s.logsOf(t, alice, r.ID)
		if r.Status != "errored" || strings.Contains(logs, "vpc-0a1b2c3d") {
			t.Errorf("%s: run %s is %s, want errored without the value:\n%s", when, r.ID, r.Status, logs)
		}
		if !strings.Contains(logs, "network") {
			t.Errorf("%s: the log does not name the workspace it could not read:\n%s", when, logs)
		}
	}
	refused("not shared", app, appCfg)

	if st, body := s.tfe(t, alice, http.MethodPost, "/workspaces/"+network+"/relationships/remote-state-consumers",
		map[string]any{"data": []map[string]string{{"type": "workspaces", "id": app}}}); st != http.StatusNoContent {
		t.Fatalf("listing app as a consumer: %d %s", st, body)
	}
	_, r := s.createRun(t, alice, app, appCfg, "plan_and_apply")
	r = s.waitRun(t, alice, r.ID, 2*time.Minute, status("awaiting_approval", "errored"))
	if r.Status != "awaiting_approval" {
		t.Fatalf("shared: app's run is %s:\n%s", r.Status, s.logsOf(t, alice, r.ID))
	}
	s.approveAndWait(t, alice, r)
	if got := s.currentOutput(t, alice, app, "network_vpc"); got != `"vpc-0a1b2c3d"` {
		t.Errorf("app's output network_vpc = %s, want the network's vpc_id", got)
	}
	conn, err := sqlx.Open("postgres", s.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var consumerReads int
	if err := conn.Get(&consumerReads, `SELECT count(*) FROM audit_events WHERE action = 'state.read_by_consumer'
		AND target_id = $1 AND evidence->>'consumer_workspace_id' = $2`, network, app); err != nil || consumerReads == 0 {
		t.Errorf("app's reads of network's state audited %d times (%v)", consumerReads, err)
	}

	refused("shared with app only", ops, opsCfg)

	// The dashboard: network's overview says app consumes it; its settings
	// add and remove a consumer and share globally, as the API then reads.
	t.Run("dashboard", func(t *testing.T) {
		sharing := func() (global bool, names []string) {
			t.Helper()
			var v struct {
				Global    bool `json:"global"`
				Consumers []struct {
					Name string `json:"name"`
				} `json:"consumers"`
			}
			if st := s.apiJSON(t, http.MethodGet, "/v1/workspaces/"+network+"/remote-state-sharing", nil, &v, alice.cookie()...); st != http.StatusOK {
				t.Fatalf("reading network's sharing: %d", st)
			}
			for _, c := range v.Consumers {
				names = append(names, c.Name)
			}
			return v.Global, names
		}
		ctx := newBrowser(t)
		signInAs(t, ctx, s, alice.email)
		browse(t, ctx, "network's overview", chromedp.Navigate(s.DashboardURL+"/workspaces/"+network),
			chromedp.WaitVisible(chromedp.CSS("#consumed-by")))
		waitText(t, ctx, "#consumed-by", "app")
		browse(t, ctx, "adding ops as a consumer", chromedp.Navigate(s.DashboardURL+"/workspaces/"+network+"/settings"),
			chromedp.WaitVisible(chromedp.CSS("#sharing-add")),
			chromedp.SetValue(chromedp.CSS("#sharing-consumer"), ops),
			chromedp.Click(chromedp.CSS("#sharing-add button[type=submit]")),
			chromedp.WaitVisible(chromedp.CSS(`#sharing-consumers button[aria-label="Remove ops"]`)))
		if global, names := sharing(); global || strings.Join(names, ",") != "app,ops" {
			t.Errorf("after adding ops in the dashboard: global %v, consumers %v", global, names)
		}
		browse(t, ctx, "removing ops", chromedp.Click(chromedp.CSS(`#sharing-consumers button[aria-label="Remove ops"]`)),
			chromedp.WaitNotPresent(chromedp.CSS(`#sharing-consumers button[aria-label="Remove ops"]`)))
		browse(t, ctx, "sharing globally", chromedp.Click(chromedp.CSS("#sharing-global-box")),
			chromedp.Click(chromedp.CSS("#sharing-global button[type=submit]")),
			chromedp.WaitVisible(chromedp.CSS("#sharing-global-note")))
		if global, names := sharing(); !global || strings.Join(names, ",") != "app" {
			t.Errorf("after sharing globally in the dashboard: global %v, consumers %v", global, names)
		}
		browse(t, ctx, "network's overview again", chromedp.Navigate(s.DashboardURL+"/workspaces/"+network),
			chromedp.WaitVisible(chromedp.CSS("#consumed-by")))
		waitText(t, ctx, "#consumed-by", "Every workspace of the organization")
	})
}

// currentOutput is the JSON value of a workspace's current output name.
func (s *Stack) currentOutput(t *testing.T, m member, workspaceID, name string) string {
	t.Helper()
	st, body := s.tfe(t, m, http.MethodGet, "/workspaces/"+workspaceID+"/current-state-version-outputs", nil)
	var doc struct {
		Data []struct {
			Attributes struct {
				Name  string          `json:"name"`
				Value json.RawMessage `json:"value"`
			} `json:"attributes"`
		} `json:"data"`
	}
	if st != http.StatusOK || json.Unmarshal(body, &doc) != nil {
		t.Fatalf("outputs of %s: %d %s", workspaceID, st, body)
	}
	for _, o := range doc.Data {
		if o.Attributes.Name == name {
			return string(o.Attributes.Value)
		}
	}
	return ""
}
