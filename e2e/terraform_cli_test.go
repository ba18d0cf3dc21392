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
	terraform.run(t, "init", "-no-color")

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
		want := strings.TrimSuffix(strings.Repeat("item-,", n), ",")
		_ = want
		for _, reader := range []tofuRun{tofu, terraform} {
			if got := reader.pull(t); got.Serial != serial || got.Lineage != first.Lineage {
				t.Fatalf("after %s's apply %s reads serial %d lineage %s, want %d %s", cli.name, reader.bin, got.Serial, got.Lineage, serial, first.Lineage)
			}
			if got := reader.names(t); strings.Count(got, "item-") != n {
				t.Fatalf("after %s's apply %s reads names %q", cli.name, reader.bin, got)
			}
		}
	}
	_ = wsID
}
