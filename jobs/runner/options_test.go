package runner

import (
	"slices"
	"strings"
	"testing"

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
