package run

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/workspace"
)

func TestValidateAddress(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{
		"null_resource.example", "terraform_data.a", `module.a.aws_instance.b["k"]`, "aws_instance.web[0]",
		"data.aws_ami.ubuntu", "module.net", `module.a["x"].module.b.type.name[3]`, strings.Repeat("a", 500) + "." + strings.Repeat("b", 523),
	} {
		if err := validateAddress(addr); err != nil {
			t.Errorf("%q refused: %v", addr, err)
		}
	}
	for _, addr := range []string{
		"", "single", "a.b c", "a.b\n", " a.b", "a.b ", "a..b", "a.b[", `a.b["k"`, "-target=a.b", "a.b; rm -rf /", "1.b",
		"a.b\x00", "a.b-c+d", "a.b[*]", "a.\xff", "a.b\tc", "a.b}", strings.Repeat("a", 600) + "." + strings.Repeat("b", 424),
		`a.b["k"] x.y`, "a.b #c",
	} {
		if err := validateAddress(addr); err == nil {
			t.Errorf("%q accepted", addr)
		}
	}
}

func TestRunOptionsValidate(t *testing.T) {
	t.Parallel()
	addrs := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "terraform_data.item"
		}
		return out
	}
	vars := func(n int) RunVariables {
		out := make(RunVariables, n)
		for i := range out {
			out[i] = RunVariable{Key: "v" + strings.Repeat("x", i), Value: `"x"`}
		}
		return out
	}
	with := func(mutate func(*RunOptions)) RunOptions {
		o := DefaultRunOptions()
		mutate(&o)
		return o
	}
	for _, tc := range []struct {
		name  string
		kind  Kind
		opts  RunOptions
		field string // "" when valid
	}{
		{"default", KindPlanAndApply, DefaultRunOptions(), ""},
		{"default plan-only", KindPlanOnly, DefaultRunOptions(), ""},
		{"targets and replacements", KindPlanAndApply, with(func(o *RunOptions) {
			o.TargetAddrs, o.ReplaceAddrs = []string{"terraform_data.a", `module.m.terraform_data.b["k"]`}, []string{"terraform_data.a"}
		}), ""},
		{"100 targets", KindPlanAndApply, with(func(o *RunOptions) { o.TargetAddrs = addrs(MaxRunAddrs) }), ""},
		{"101 targets", KindPlanAndApply, with(func(o *RunOptions) { o.TargetAddrs = addrs(MaxRunAddrs + 1) }), "target_addrs"},
		{"101 replacements", KindPlanAndApply, with(func(o *RunOptions) { o.ReplaceAddrs = addrs(MaxRunAddrs + 1) }), "replace_addrs"},
		{"a bad target", KindPlanAndApply, with(func(o *RunOptions) { o.TargetAddrs = []string{"terraform_data.a", "nope"} }), "target_addrs"},
		{"a bad replacement", KindPlanAndApply, with(func(o *RunOptions) { o.ReplaceAddrs = []string{"a.b\nc = 1"} }), "replace_addrs"},
		{"no refresh", KindPlanAndApply, with(func(o *RunOptions) { o.Refresh = false }), ""},
		{"refresh-only", KindPlanAndApply, with(func(o *RunOptions) { o.RefreshOnly = true }), ""},
		{"refresh-only without refresh", KindPlanAndApply, with(func(o *RunOptions) { o.RefreshOnly, o.Refresh = true, false }), "refresh_only"},
		{"refresh-only replacing", KindPlanAndApply, with(func(o *RunOptions) {
			o.RefreshOnly, o.ReplaceAddrs = true, []string{"a.b"}
		}), "replace_addrs"},
		{"refresh-only targeting", KindPlanAndApply, with(func(o *RunOptions) { o.RefreshOnly, o.TargetAddrs = true, []string{"a.b"} }), ""},
		{"empty apply", KindPlanAndApply, with(func(o *RunOptions) { o.AllowEmptyApply = true }), ""},
		{"empty apply of a plan-only run", KindPlanOnly, with(func(o *RunOptions) { o.AllowEmptyApply = true }), "allow_empty_apply"},
		{"saved plan", KindPlanAndApply, with(func(o *RunOptions) { o.SavePlan = true }), ""},
		{"speculative saved plan", KindSpeculative, with(func(o *RunOptions) { o.SavePlan = true }), "save_plan"},
		{"plan-only saved plan", KindPlanOnly, with(func(o *RunOptions) { o.SavePlan = true }), "save_plan"},
		{"variables", KindPlanAndApply, with(func(o *RunOptions) {
			o.Variables = RunVariables{{Key: "region", Value: `"eu-west-1"`}, {Key: "count_", Value: "3"}}
		}), ""},
		// Values are HCL expressions checked when the plan writes them (as
		// HCP Terraform does), so a bare word is taken here.
		{"a value that is no expression", KindPlanAndApply, with(func(o *RunOptions) {
			o.Variables = RunVariables{{Key: "greeting", Value: "Hello, World!"}}
		}), ""},
		{"100 variables", KindPlanAndApply, with(func(o *RunOptions) { o.Variables = vars(MaxRunVariables) }), ""},
		{"101 variables", KindPlanAndApply, with(func(o *RunOptions) { o.Variables = vars(MaxRunVariables + 1) }), "variables"},
		{"a key twice", KindPlanAndApply, with(func(o *RunOptions) {
			o.Variables = RunVariables{{Key: "a", Value: "1"}, {Key: "a", Value: "2"}}
		}), "variables"},
		{"a bad key", KindPlanAndApply, with(func(o *RunOptions) { o.Variables = RunVariables{{Key: "1a", Value: "1"}} }), "variables"},
		{"an empty key", KindPlanAndApply, with(func(o *RunOptions) { o.Variables = RunVariables{{Key: "", Value: "1"}} }), "variables"},
		{"a value at its bound", KindPlanAndApply, with(func(o *RunOptions) {
			o.Variables = RunVariables{{Key: "big", Value: `"` + strings.Repeat("x", MaxRunVariableValueBytes-2) + `"`}}
		}), ""},
		{"a value over its bound", KindPlanAndApply, with(func(o *RunOptions) {
			o.Variables = RunVariables{{Key: "big", Value: strings.Repeat("x", MaxRunVariableValueBytes+1)}}
		}), "variables"},
		{"a value with NUL", KindPlanAndApply, with(func(o *RunOptions) { o.Variables = RunVariables{{Key: "a", Value: "\"a\x00\""}} }), "variables"},
		{"a value that is not UTF-8", KindPlanAndApply, with(func(o *RunOptions) { o.Variables = RunVariables{{Key: "a", Value: "\xff"}} }), "variables"},
	} {
		err := tc.opts.Validate(tc.kind)
		if tc.field == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", tc.name, err)
			}
			continue
		}
		oe, ok := OptionErrorOf(err)
		if !ok || oe.Field != tc.field || !errors.Is(err, ErrRunOption) || !errors.Is(err, fault.ErrValidation) {
			t.Errorf("%s: got %v, want a refusal of %s", tc.name, err, tc.field)
			continue
		}
		if strings.Contains(oe.Reason, "\n") || len(oe.Reason) > 200 {
			t.Errorf("%s: reason %q is not one bounded sentence", tc.name, oe.Reason)
		}
	}
}

// TestValidExpression: the runner accepts an HCL value for the variables
// file only when workspace.ValidateValue finds exactly one expression.
func TestValidExpression(t *testing.T) {
	t.Parallel()
	for _, v := range []string{`"x"`, "3", "true", `["a", "b"]`, `{ name = "alb", internal = true }`, "null", `"${x}"`, "tomap({})"} {
		if workspace.ValidateValue(v, true) != nil {
			t.Errorf("%q refused", v)
		}
	}
	// A second assignment after the value, or half an expression, never
	// reaches the variables file.
	for _, v := range []string{"Hello, World!", "\"a\"\nother = \"b\"", `"a" other = "b"`, `"open`, "", "[1,"} {
		if workspace.ValidateValue(v, true) == nil {
			t.Errorf("%q accepted", v)
		}
	}
}

// A run's options change its input snapshot, and so the digest approval
// and evidence bind; a run without options keeps the snapshot it had
// before runs had options.
func TestOptionsSnapshot(t *testing.T) {
	t.Parallel()
	if snapshotOptions(DefaultRunOptions(), "") != nil {
		t.Fatal("a run without options records options")
	}
	base := DefaultRunOptions()
	base.Variables = RunVariables{{Key: "greeting", Value: `"hello"`}}
	encode := func(o RunOptions, tool string) string {
		b, err := json.Marshal(snapshotOptions(o, tool))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	seen := map[string]string{encode(base, ""): "base"}
	for name, o := range map[string]RunOptions{
		"value":   {Refresh: true, Variables: RunVariables{{Key: "greeting", Value: `"hullo"`}}},
		"key":     {Refresh: true, Variables: RunVariables{{Key: "greeting2", Value: `"hello"`}}},
		"target":  {Refresh: true, Variables: base.Variables, TargetAddrs: []string{"a.b"}},
		"replace": {Refresh: true, Variables: base.Variables, ReplaceAddrs: []string{"a.b"}},
		"refresh": {Refresh: false, Variables: base.Variables},
		"empty":   {Refresh: true, Variables: base.Variables, AllowEmptyApply: true},
		"saved":   {Refresh: true, Variables: base.Variables, SavePlan: true},
	} {
		got := encode(o, "")
		if other, dup := seen[got]; dup {
			t.Errorf("a changed %s records the same options as %s: %s", name, other, got)
		}
		seen[got] = name
	}
	if encode(base, "1.10.6") == encode(base, "") {
		t.Error("the requested tool version is not recorded")
	}
	if strings.Contains(encode(base, ""), "hello") {
		t.Error("the snapshot holds a variable's value rather than its digest")
	}
}

func TestWithRunVariablesOverridesByKey(t *testing.T) {
	t.Parallel()
	pinned := []workspace.ResolvedVariable{
		{Key: "region", Value: "us-east-1"},
		{Key: "token", Value: "s3cret", Sensitive: true},
		{Key: "tags", Value: `{a = 1}`, HCL: true},
	}
	got := WithRunVariables(pinned, RunVariables{{Key: "token", Value: `"run"`}, {Key: "extra", Value: "2"}})
	want := []workspace.ResolvedVariable{
		{Key: "region", Value: "us-east-1"},
		{Key: "tags", Value: `{a = 1}`, HCL: true},
		{Key: "token", Category: workspace.CategoryTerraform, Value: `"run"`, HCL: true},
		{Key: "extra", Category: workspace.CategoryTerraform, Value: "2", HCL: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("merged inputs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(pinned, WithRunVariables(pinned, nil)); diff != "" {
		t.Fatalf("without run variables (-want +got):\n%s", diff)
	}
}

// A priority set's value is never replaced by a run variable (HCP: priority
// sets cannot be overridden); an env variable is never replaced by a run
// variable of the same name, which is a terraform variable.
func TestWithRunVariablesKeepsPriorityValues(t *testing.T) {
	t.Parallel()
	pinned := []workspace.ResolvedVariable{
		{Key: "region", Category: workspace.CategoryTerraform, Value: "ap-south-1", Priority: true},
		{Key: "size", Category: workspace.CategoryTerraform, Value: "small"},
		{Key: "size", Category: workspace.CategoryEnv, Value: "env-size"},
	}
	got := WithRunVariables(pinned, RunVariables{{Key: "region", Value: `"us-east-1"`}, {Key: "size", Value: `"large"`}})
	want := []workspace.ResolvedVariable{
		{Key: "region", Category: workspace.CategoryTerraform, Value: "ap-south-1", Priority: true},
		{Key: "size", Category: workspace.CategoryEnv, Value: "env-size"},
		{Key: "size", Category: workspace.CategoryTerraform, Value: `"large"`, HCL: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("merged inputs (-want +got):\n%s", diff)
	}
}
