package launch

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

const (
	orgA = "org_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	orgB = "org_bbbbbbbbbbbbbbbbbbbbbbbbbb"
	wsA  = "ws_aaaaaaaaaaaaaaaaaaaaaaaaaa"
	wsB  = "ws_bbbbbbbbbbbbbbbbbbbbbbbbbb"
)

func TestAdmit(t *testing.T) {
	t.Parallel()
	closed := Default()
	canary := Default()
	canary.CanaryAllowlist = []Pair{{OrganizationID: orgA, WorkspaceID: wsA}}
	open := Default()
	open.PublicGate = true

	for name, tc := range map[string]struct {
		control  *Control
		subject  Subject
		susp     Suspension
		admitted bool
		mode     Admission
	}{
		"missing control":                   {nil, Subject{orgA, wsA}, Suspension{}, false, ""},
		"closed gate":                       {&closed, Subject{orgA, wsA}, Suspension{}, false, ""},
		"closed gate, organization-wide":    {&closed, Subject{orgA, ""}, Suspension{}, false, ""},
		"allowlisted pair":                  {&canary, Subject{orgA, wsA}, Suspension{}, true, AdmissionCanary},
		"workspace ID alone, other org":     {&canary, Subject{orgB, wsA}, Suspension{}, false, ""},
		"other workspace of the org":        {&canary, Subject{orgA, wsB}, Suspension{}, false, ""},
		"canary never admits org-wide":      {&canary, Subject{orgA, ""}, Suspension{}, false, ""},
		"other organization":                {&canary, Subject{orgB, wsB}, Suspension{}, false, ""},
		"unresolved ownership, closed gate": {&canary, Subject{"", wsA}, Suspension{}, false, ""},
		"unresolved ownership, open gate":   {&open, Subject{"", ""}, Suspension{}, true, AdmissionOpen},
		"public gate":                       {&open, Subject{orgB, ""}, Suspension{}, true, AdmissionOpen},
		"suspended organization, open gate": {&open, Subject{orgA, wsA}, Suspension{Organization: true}, false, ""},
		"suspended workspace, allowlisted":  {&canary, Subject{orgA, wsA}, Suspension{Workspace: true}, false, ""},
		"suspended organization, org-wide":  {&open, Subject{orgA, ""}, Suspension{Organization: true}, false, ""},
	} {
		d := Admit(tc.control, tc.subject, tc.susp)
		if d.Admitted != tc.admitted || d.Admission != tc.mode {
			t.Errorf("%s: %+v, want admitted=%v mode=%q", name, d, tc.admitted, tc.mode)
		}
		// The gate alone ignores suspensions and nothing else.
		access := AdmitAccess(tc.control, tc.subject, tc.susp)
		unsuspended := Admit(tc.control, tc.subject, Suspension{})
		if access != unsuspended {
			t.Errorf("%s: AdmitAccess %+v, Admit without suspension %+v", name, access, unsuspended)
		}
	}
}

func TestRulesOnTopOfAdmission(t *testing.T) {
	t.Parallel()
	open := Default()
	open.PublicGate = true
	subject := Subject{orgA, wsA}
	with := func(f func(c *Control)) *Control {
		c := Default()
		c.PublicGate = true
		f(&c)
		return &c
	}
	for name, tc := range map[string]struct {
		rule     Rule
		control  *Control
		susp     Suspension
		admitted bool
		reason   string
	}{
		"new run":                      {AdmitNewRun(NewRun{Region: "us", RunnerRelease: RunnerRelease}), &open, Suspension{}, true, "public_gate"},
		"new run, switch off":          {AdmitNewRun(NewRun{Region: "us", RunnerRelease: RunnerRelease}), with(func(c *Control) { c.NewRunsEnabled = false }), Suspension{}, false, "new_runs_disabled"},
		"new run, eu":                  {AdmitNewRun(NewRun{Region: "eu", RunnerRelease: RunnerRelease}), &open, Suspension{}, false, "region_disabled"},
		"new run, ceiling":             {AdmitNewRun(NewRun{Region: "us", RunnerRelease: RunnerRelease, Unfinished: 50}), &open, Suspension{}, false, "pending_run_ceiling"},
		"new run, runner release":      {AdmitNewRun(NewRun{Region: "us", RunnerRelease: "cairn-runner-0"}), &open, Suspension{}, false, "runner_release_not_allowed"},
		"new run, suspended":           {AdmitNewRun(NewRun{Region: "us", RunnerRelease: RunnerRelease}), &open, Suspension{Workspace: true}, false, "suspended"},
		"apply, switch off":            {AdmitApply, with(func(c *Control) { c.AppliesEnabled = false }), Suspension{}, false, "applies_disabled"},
		"policy build":                 {AdmitPolicyBuild("us"), &open, Suspension{}, true, "public_gate"},
		"policy build, release":        {AdmitPolicyBuild("us"), with(func(c *Control) { c.PolicyReleases = []string{"opa-0.1.0"} }), Suspension{}, false, "policy_release_not_allowed"},
		"policy build, region":         {AdmitPolicyBuild("eu"), &open, Suspension{}, false, "region_disabled"},
		"policy build, suspended":      {AdmitPolicyBuild("us"), &open, Suspension{Organization: true}, false, "suspended"},
		"policy build, no control":     {AdmitPolicyBuild("us"), nil, Suspension{}, false, "control_missing"},
		"policy evaluation":            {AdmitPolicyEvaluation, &open, Suspension{Workspace: true}, true, "policy_release_allowed"},
		"policy evaluation, release":   {AdmitPolicyEvaluation, with(func(c *Control) { c.PolicyReleases = []string{} }), Suspension{}, false, "policy_release_not_allowed"},
		"policy evaluation, none":      {AdmitPolicyEvaluation, nil, Suspension{}, false, "policy_release_not_allowed"},
		"federation, provider off":     {AdmitFederation("aws"), &open, Suspension{}, false, "federation_provider_disabled"},
		"federation, provider on":      {AdmitFederation("aws"), with(func(c *Control) { c.FederationProviders["aws"] = true }), Suspension{}, true, "public_gate"},
		"federation, unknown":          {AdmitFederation("oracle"), with(func(c *Control) { c.FederationProviders["aws"] = true }), Suspension{}, false, "federation_provider_disabled"},
		"sandbox, region switched on":  {AdmitSandbox("us"), &open, Suspension{}, true, "region_enabled"},
		"sandbox, region switched off": {AdmitSandbox("us"), with(func(c *Control) { c.Regions["us"] = false }), Suspension{}, false, "region_disabled"},
	} {
		d := tc.rule(tc.control, subject, tc.susp)
		if d.Admitted != tc.admitted || d.Reason != tc.reason {
			t.Errorf("%s: %+v, want admitted=%v reason=%s", name, d, tc.admitted, tc.reason)
		}
	}
}

func TestRouting(t *testing.T) {
	t.Parallel()
	c := Default()
	if c.Queue(WorkflowRun) != "runs" || c.Queue(WorkflowPolicy) != "policy" || (*Control)(nil).Queue(WorkflowRun) != "" {
		t.Fatalf("default routing %v", c.WorkflowRouting)
	}
	for _, kind := range WorkflowKinds {
		if !slices.Contains(Queues, c.Queue(kind)) {
			t.Errorf("default control routes %s to a queue no worker serves", kind)
		}
	}
}

func TestParseIsStrict(t *testing.T) {
	t.Parallel()
	good := Default()
	doc, _ := json.Marshal(good)
	if _, err := Parse(doc); err != nil {
		t.Fatalf("default control does not parse: %v", err)
	}
	mutate := func(f func(m map[string]any)) []byte {
		var m map[string]any
		_ = json.Unmarshal(doc, &m)
		f(m)
		out, _ := json.Marshal(m)
		return out
	}
	for name, bad := range map[string][]byte{
		"not json":        []byte("{"),
		"empty object":    []byte("{}"),
		"unknown field":   mutate(func(m map[string]any) { m["open_everything"] = true }),
		"missing regions": mutate(func(m map[string]any) { delete(m, "regions") }),
		"extra region":    mutate(func(m map[string]any) { m["regions"] = map[string]bool{"us": true, "eu": false, "ap": true} }),
		"bare workspace":  mutate(func(m map[string]any) { m["canary_allowlist"] = []map[string]string{{"workspace_id": wsA}} }),
		"launched orgs":   mutate(func(m map[string]any) { m["launched_organizations"] = []string{orgA} }),
		"unserved queue":  mutate(func(m map[string]any) { m["workflow_routing"] = map[string]string{"run": "fast", "policy": "policy"} }),
		"unrouted kind":   mutate(func(m map[string]any) { m["workflow_routing"] = map[string]string{"run": "runs"} }),
		"unknown kind": mutate(func(m map[string]any) {
			m["workflow_routing"] = map[string]string{"run": "runs", "policy": "policy", "drift": "default"}
		}),
		"negative ceiling": mutate(func(m map[string]any) {
			m["ceilings"] = map[string]any{"sandboxes_per_region": map[string]int{"us": -1, "eu": 0}, "pending_runs_per_workspace": 5}
		}),
		"too many canaries": mutate(func(m map[string]any) { m["canary_allowlist"] = make([]map[string]string, MaxAllowlist+1) }),
		"trailing data":     append(append([]byte{}, doc...), []byte(` {}`)...),
		"huge":              []byte(`{"x":"` + strings.Repeat("a", maxDocBytes) + `"}`),
	} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
