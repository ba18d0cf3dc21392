package launch

import (
	"encoding/json"
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
	launched := Default()
	launched.LaunchedOrganizations = []string{orgA}

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
		"unresolved ownership, closed gate": {&launched, Subject{"", wsA}, Suspension{}, false, ""},
		"unresolved ownership, open gate":   {&open, Subject{"", ""}, Suspension{}, true, AdmissionOpen},
		"public gate":                       {&open, Subject{orgB, ""}, Suspension{}, true, AdmissionOpen},
		"launched organization":             {&launched, Subject{orgA, ""}, Suspension{}, true, AdmissionOpen},
		"launched organization, other org":  {&launched, Subject{orgB, wsB}, Suspension{}, false, ""},
		"suspended organization, open gate": {&open, Subject{orgA, wsA}, Suspension{Organization: true}, false, ""},
		"suspended workspace, allowlisted":  {&canary, Subject{orgA, wsA}, Suspension{Workspace: true}, false, ""},
	} {
		d := Admit(tc.control, tc.subject, tc.susp)
		if d.Admitted != tc.admitted || d.Admission != tc.mode {
			t.Errorf("%s: %+v, want admitted=%v mode=%q", name, d, tc.admitted, tc.mode)
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
		"wrong org id":    mutate(func(m map[string]any) { m["launched_organizations"] = []string{"acme"} }),
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
