package runner

import (
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/workspace"
)

func TestPlanOptionArgs(t *testing.T) {
	t.Parallel()
	if args := planOptionArgs(run.DefaultRunOptions()); len(args) != 0 {
		t.Fatalf("a run without options plans with %q", args)
	}
	o := run.DefaultRunOptions()
	o.Refresh = false
	o.TargetAddrs = []string{"terraform_data.a", `module.m.terraform_data.b["k"]`}
	o.ReplaceAddrs = []string{"terraform_data.c"}
	want := []string{"-refresh=false", "-target=terraform_data.a", `-target=module.m.terraform_data.b["k"]`, "-replace=terraform_data.c"}
	if got := planOptionArgs(o); !slices.Equal(got, want) {
		t.Fatalf("plan flags %q, want %q", got, want)
	}
	refreshOnly := run.DefaultRunOptions()
	refreshOnly.RefreshOnly = true
	if got := planOptionArgs(refreshOnly); !slices.Equal(got, []string{"-refresh-only"}) {
		t.Fatalf("refresh-only plan flags %q", got)
	}
}

// A run variable reaches the variables file as the HCL expression it is,
// over the workspace variable of the same key.
func TestTfvarsWritesRunVariablesAsExpressions(t *testing.T) {
	t.Parallel()
	pinned := []workspace.ResolvedVariable{{Key: "greeting", Value: "from the workspace"}, {Key: "size", Value: "small"}}
	got := string(tfvars(run.WithRunVariables(pinned, run.RunVariables{{Key: "greeting", Value: `"from the run"`},
		{Key: "tags", Value: `{ team = "infra" }`}})))
	compact := strings.ReplaceAll(got, " ", "")
	for _, want := range []string{`greeting="fromtherun"`, `size="small"`, `tags={team="infra"}`} {
		if !strings.Contains(compact, want) {
			t.Errorf("variables file lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "from the workspace") {
		t.Errorf("the overridden workspace value is still written:\n%s", got)
	}
}

// A stored key no configuration can declare (HCP's clients write UUIDs) is
// left out, so the variables file still parses.
func TestTfvarsLeavesOutKeysThatAreNoIdentifier(t *testing.T) {
	t.Parallel()
	got := tfvars([]workspace.ResolvedVariable{{Key: "3f2a9c1e-77b0-4c1d", Value: "x", Category: workspace.CategoryTerraform},
		{Key: "region", Value: "eu-west-1", Category: workspace.CategoryTerraform}})
	if _, diags := hclsyntax.ParseConfig(got, "inputs.tfvars", hcl.InitialPos); diags.HasErrors() {
		t.Fatalf("variables file does not parse: %s\n%s", diags, got)
	}
	if strings.Contains(string(got), "3f2a9c1e") || !strings.Contains(string(got), "eu-west-1") {
		t.Errorf("variables file:\n%s", got)
	}
}
