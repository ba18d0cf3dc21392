package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// terraformBinary is the checksum-verified Terraform 1.5.7 of the
// toolchain mirror, the second CLI.
func terraformBinary(t *testing.T) string {
	t.Helper()
	return toolchainBinary(t, "terraform", "1.5.7")
}

// sharedConfig is one configuration both CLIs run against the workspace
// "shared": items counted by n, and their names as an output.
const sharedConfig = `terraform {
  cloud {
    hostname     = %q
    organization = %q
    workspaces {
      name = "shared"
    }
  }
}

variable "n" {
  type    = number
  default = 1
}

resource "terraform_data" "item" {
  count = var.n
  input = "item-${count.index}"
}

output "names" {
  value = terraform_data.item[*].output
}
`

// pulledState is what `state pull` shows of a state snapshot.
type pulledState struct {
	Serial  int64  `json:"serial"`
	Lineage string `json:"lineage"`
	Outputs map[string]struct {
		Value any `json:"value"`
	} `json:"outputs"`
}

func (r tofuRun) pull(t *testing.T) pulledState {
	t.Helper()
	var st pulledState
	if out := r.run(t, "state", "pull"); json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("%s state pull:\n%s", r.bin, out)
	}
	return st
}

// names is the CLI's own reading of the names output.
func (r tofuRun) names(t *testing.T) string {
	t.Helper()
	var names []string
	if out := r.run(t, "output", "-json", "names"); json.Unmarshal([]byte(out), &names) != nil {
		t.Fatalf("%s output:\n%s", r.bin, out)
	}
	return strings.Join(names, ",")
}

// TestBothCLIsShareAWorkspace drives OpenTofu 1.10.6 and Terraform 1.5.7
// against one workspace: in state mode each continues the state the other
// wrote (same lineage, serial one higher), and in remote mode each plans
// with streamed logs and applies after a "yes" at its own prompt, both
// reading the same serial and outputs afterwards.
func TestBothCLIsShareAWorkspace(t *testing.T) {
	t.Parallel()
	s := runsStack(t)
	m := s.newMember(t, "clis")
	config := fmt.Sprintf(sharedConfig, s.APIHost, m.slug)
	tofu := registryCLI(t, s, tofuBinary(t), m.token, config)
	terraform := registryCLI(t, s, terraformBinary(t), m.token, config)

	tofu.run(t, "init", "-no-color")
	auth := []string{"Authorization", "Bearer " + m.token}
	setMode := func(mode string) string {
		st, body := call(t, s.Client, http.MethodPatch, s.APIURL+"/api/v2/organizations/"+m.slug+"/workspaces/shared",
			[]byte(`{"data":{"type":"workspaces","attributes":{"execution-mode":"`+mode+`"}}}`), append(auth, "Content-Type", "application/vnd.api+json")...)
		if st != http.StatusOK {
			t.Fatalf("switching to %s execution: %d %s", mode, st, body)
		}
		var doc struct{ Data struct{ ID string } }
		_ = json.Unmarshal(body, &doc)
		return doc.Data.ID
	}
	wsID := setMode("local")
	// Terraform is not offered here: asking for it is refused, and the
	// workspace keeps OpenTofu, for the terraform CLI's runs too.
	terraform.run(t, "init", "-no-color")
	refuseUnlistedTerraform(t, s, m, wsID)

	// State mode: each CLI continues the other's state.
	tofu.run(t, "apply", "-auto-approve", "-no-color", "-var", "n=1")
	first := tofu.pull(t)
	terraform.run(t, "apply", "-auto-approve", "-no-color", "-var", "n=2")
	second := terraform.pull(t)
	if second.Lineage != first.Lineage || second.Serial != first.Serial+1 {
		t.Fatalf("terraform after tofu: serial %d lineage %s, tofu wrote %d %s", second.Serial, second.Lineage, first.Serial, first.Lineage)
	}
	if got := tofu.names(t); got != "item-0,item-1" {
		t.Fatalf("tofu reads terraform's outputs as %q", got)
	}
	tofu.run(t, "apply", "-auto-approve", "-no-color", "-var", "n=3")
	third := terraform.pull(t)
	if third.Lineage != first.Lineage || third.Serial != second.Serial+1 || terraform.names(t) != "item-0,item-1,item-2" {
		t.Fatalf("tofu after terraform: serial %d lineage %s", third.Serial, third.Lineage)
	}

	// Remote mode: a plan streams from the sandbox, an apply waits for the
	// "yes" typed at the CLI's own prompt.
	setMode("remote")
	serial := third.Serial
	for i, cli := range []struct {
		name string
		run  tofuRun
	}{{"tofu", tofu}, {"terraform", terraform}} {
		n := 4 + i
		out := cli.run.run(t, "plan", "-no-color", "-var", fmt.Sprintf("n=%d", n))
		if !strings.Contains(out, "Plan: 1 to add, 0 to change, 0 to destroy.") || !strings.Contains(out, "Cairn plan phase of run_") {
			t.Fatalf("%s remote plan:\n%s", cli.name, out)
		}
		apply := cli.run.interactive().start(t, "apply", "-no-color", "-var", fmt.Sprintf("n=%d", n))
		waitForOutput(t, apply, "Enter a value:")
		_, _ = io.WriteString(apply.stdin, "yes\n")
		if err := apply.wait(t, 120*time.Second); err != nil || !strings.Contains(apply.out.String(), "Apply complete! Resources: 1 added") {
			t.Fatalf("%s apply confirmed at the prompt (%v):\n%s", cli.name, err, apply.out.String())
		}
		serial++
		if !strings.Contains(out, "OpenTofu 1.10.6 on linux_amd64") {
			t.Fatalf("%s's run did not use OpenTofu:\n%s", cli.name, out)
		}
		for _, reader := range []tofuRun{tofu, terraform} {
			if got := reader.pull(t); got.Serial != serial || got.Lineage != first.Lineage {
				t.Fatalf("after %s's apply %s reads serial %d lineage %s, want %d %s", cli.name, reader.bin, got.Serial, got.Lineage, serial, first.Lineage)
			}
			if got := reader.names(t); strings.Count(got, "item-") != n {
				t.Fatalf("after %s's apply %s reads names %q", cli.name, reader.bin, got)
			}
		}
	}
}

// TestTerraformVersionRunsTerraform: with CAIRN_TERRAFORM_VERSIONS=1.5.7,
// `terraform init` creates a workspace that pins Terraform 1.5.7 (the CLI
// selects its own version, as with HCP Terraform), and a remote plan runs
// the verified terraform binary in the sandbox; the workspace shows the
// bare version on /api/v2 and the pinned one on /v1.
func TestTerraformVersionRunsTerraform(t *testing.T) {
	t.Parallel()
	terraformBinary(t)
	s := runsStack(t, "CAIRN_TERRAFORM_VERSIONS=1.5.7")
	m := s.newMember(t, "tfrun")
	terraform := registryCLI(t, s, terraformBinary(t), m.token, fmt.Sprintf(sharedConfig, s.APIHost, m.slug))
	if out := terraform.run(t, "init", "-no-color"); strings.Contains(out, "not available") {
		t.Fatalf("init did not select Terraform 1.5.7:\n%s", out)
	}
	auth := []string{"Authorization", "Bearer " + m.token}
	st, body := call(t, s.Client, http.MethodGet, s.APIURL+"/api/v2/organizations/"+m.slug+"/workspaces/shared", nil, auth...)
	var doc struct {
		Data struct {
			ID         string
			Attributes struct {
				TerraformVersion string `json:"terraform-version"`
				ExecutionMode    string `json:"execution-mode"`
			}
		}
	}
	if st != http.StatusOK || json.Unmarshal(body, &doc) != nil || doc.Data.Attributes.TerraformVersion != "1.5.7" ||
		doc.Data.Attributes.ExecutionMode != "remote" {
		t.Fatalf("workspace after terraform init: %d %s", st, body)
	}
	var ws struct {
		ExecutionSettings struct {
			ToolVersion string `json:"tool_version"`
		} `json:"execution_settings"`
	}
	if st := s.apiJSON(t, http.MethodGet, "/v1/workspaces/"+doc.Data.ID, nil, &ws, m.cookie()...); st != http.StatusOK ||
		ws.ExecutionSettings.ToolVersion != "terraform-1.5.7" {
		t.Fatalf("/v1 workspace: %d %+v", st, ws)
	}

	out := terraform.run(t, "plan", "-no-color", "-var", "n=2")
	if !strings.Contains(out, "Terraform 1.5.7 on linux_amd64") || !strings.Contains(out, "Plan: 2 to add, 0 to change, 0 to destroy.") {
		t.Fatalf("remote plan with Terraform:\n%s", out)
	}
	spec := s.newestRun(t, m, doc.Data.ID, 10*time.Second, status("planned_and_finished"))
	var evidence struct {
		Evidence struct {
			ToolVersion string `json:"tool_version"`
		} `json:"evidence"`
	}
	if st := s.apiJSON(t, http.MethodGet, "/v1/runs/"+spec.ID, nil, &evidence, m.cookie()...); st != http.StatusOK ||
		evidence.Evidence.ToolVersion != "terraform-1.5.7" {
		t.Fatalf("run evidence: %d %+v", st, evidence)
	}
	// The plan JSON the sandbox's terraform wrote is Terraform's own.
	if logs := s.logsOf(t, m, spec.ID); !strings.Contains(logs, "Terraform 1.5.7") || strings.Contains(logs, "OpenTofu") {
		t.Fatalf("run log:\n%s", logs)
	}
}

// refuseUnlistedTerraform asks for Terraform 1.5.7 on a stack that does
// not list it: /api/v2 and /v1 answer 422 naming the settings, and the
// workspace keeps OpenTofu.
func refuseUnlistedTerraform(t *testing.T, s *Stack, m member, workspaceID string) {
	t.Helper()
	st, body := call(t, s.Client, http.MethodPatch, s.APIURL+"/api/v2/workspaces/"+workspaceID,
		[]byte(`{"data":{"type":"workspaces","attributes":{"terraform-version":"1.5.7"}}}`),
		"Authorization", "Bearer "+m.token, "Content-Type", "application/vnd.api+json")
	if st != http.StatusUnprocessableEntity || !strings.Contains(string(body), "CAIRN_TERRAFORM_VERSIONS") {
		t.Fatalf("/api/v2 terraform-version 1.5.7 unlisted: %d %s", st, body)
	}
	st, body = call(t, s.Client, http.MethodPatch, s.APIURL+"/v1/workspaces/"+workspaceID,
		mustJSON(map[string]any{"execution_settings": map[string]string{"tool_version": "terraform-1.5.7", "region": "us", "platform": "linux_amd64"}}),
		append(m.mutate(uniqueKey("tool")), "Content-Type", "application/json")...)
	if st != http.StatusUnprocessableEntity || !strings.Contains(string(body), "WORKSPACE_TOOL_VERSION_UNLISTED") {
		t.Fatalf("/v1 tool_version terraform-1.5.7 unlisted: %d %s", st, body)
	}
	var ws struct {
		ExecutionSettings struct {
			ToolVersion string `json:"tool_version"`
		} `json:"execution_settings"`
	}
	if s.apiJSON(t, http.MethodGet, "/v1/workspaces/"+workspaceID, nil, &ws, m.cookie()...); ws.ExecutionSettings.ToolVersion != "1.10.6" {
		t.Fatalf("the workspace's tool version became %q", ws.ExecutionSettings.ToolVersion)
	}
}
