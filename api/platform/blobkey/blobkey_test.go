package blobkey_test

import (
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/platform/blobkey"
	"github.com/cairnhq/cairn/api/platform/id"
)

// TestConstructorsKeepTheirLayouts pins the layouts: rows of existing
// deployments hold keys in them, and the sweep recognises nothing else.
func TestConstructorsKeepTheirLayouts(t *testing.T) {
	t.Parallel()
	org, ws, sv, run, cfg, pol, seg := id.New("org"), id.New("ws"), id.New("sv"), id.New("run"), id.New("cfg"), id.New("pol"), id.New("logseg")
	mod, modv := id.New("mod"), id.New("modv")
	for _, tc := range []struct{ key, start, end string }{
		{blobkey.State(org, ws, sv), "state/" + org + "/" + ws + "/" + sv + "-obj_", ".tfstate"},
		{blobkey.StateJSON(org, ws, sv), "state/" + org + "/" + ws + "/" + sv + "-json_", ".json"},
		{blobkey.Configuration(org, cfg), "configuration-versions/" + org + "/" + cfg + "/obj_", ""},
		{blobkey.RunArtifact(org, run, "plan_json"), "runs/" + org + "/" + run + "/plan_json/obj_", ""},
		{blobkey.RunLogSegment(org, run, seg), "runs/" + org + "/" + run + "/log/logseg_", ""},
		{blobkey.PolicySource(org), "policy-sources/" + org + "/obj_", ""},
		{blobkey.PolicyArtifact(org, pol), "policy-versions/" + org + "/" + pol + "/obj_", ""},
		{blobkey.RegistryModuleVersion(org, mod, modv), "registry/" + org + "/" + mod + "/" + modv + "/obj_", ""},
	} {
		middle, started := strings.CutPrefix(tc.key, tc.start)
		middle, ended := strings.CutSuffix(middle, tc.end)
		if !started || !ended || !id.HasPrefix("x_"+middle, "x") {
			t.Errorf("key %q, want %s<random part>%s", tc.key, tc.start, tc.end)
		}
	}
	if a, b := blobkey.State(org, ws, sv), blobkey.State(org, ws, sv); a == b {
		t.Error("two uploads of one state version share a key")
	}
	// An ID that could leave its segment stays in it.
	if key := blobkey.State("../../etc", "a/b", sv); strings.Count(key, "/") != 3 || strings.Contains(key, "..") {
		t.Errorf("key %q escapes its segments", key)
	}
}

func TestRecognisedAcceptsOnlyCairnsExactKeys(t *testing.T) {
	t.Parallel()
	org, ws, sv, run, cfg, pol, seg := id.New("org"), id.New("ws"), id.New("sv"), id.New("run"), id.New("cfg"), id.New("pol"), id.New("logseg")
	obj := id.New("obj")
	state := blobkey.State(org, ws, sv)
	artifact := blobkey.RunArtifact(org, run, "plan_file")
	accepted := []string{
		state,
		blobkey.State(org, ws, id.Derived("sv", []byte("recovered state"))),
		blobkey.StateJSON(org, ws, sv),
		blobkey.Configuration(org, cfg),
		blobkey.RunLogSegment(org, run, seg),
		blobkey.PolicySource(org),
		blobkey.PolicyArtifact(org, pol),
		blobkey.RegistryModuleVersion(org, id.New("mod"), id.New("modv")),
	}
	for _, kind := range []string{"plan_file", "plan_json", "plan_diff", "emergency_state"} {
		accepted = append(accepted, blobkey.RunArtifact(org, run, kind))
	}
	for _, key := range accepted {
		if !blobkey.Recognised(key) {
			t.Errorf("Cairn's own key %q is not recognised", key)
		}
	}

	badBase32 := "org_" + strings.Repeat("0", id.RandomLength)
	for name, key := range map[string]string{
		"another tool's state":           "state/prod/terraform.tfstate",
		"another tool's report":          "runs/2024-06/report.csv",
		"foreign name in a workspace":    "state/" + org + "/" + ws + "/terraform.tfstate",
		"workspace slot holds a run":     blobkey.State(org, run, sv),
		"organization slot holds a ws":   blobkey.Configuration(ws, cfg),
		"run slot holds a configuration": blobkey.RunArtifact(org, cfg, "plan_file"),
		"version slot holds a state":     blobkey.PolicyArtifact(org, sv),
		"module slot holds a version":    blobkey.RegistryModuleVersion(org, id.New("modv"), id.New("modv")),
		"object slot holds a run":        "policy-sources/" + org + "/" + run,
		"short ID":                       blobkey.PolicySource(org[:len(org)-1]),
		"long ID":                        blobkey.PolicySource(org + "a"),
		"ID outside base32":              blobkey.PolicySource(badBase32),
		"ID without its underscore":      "policy-sources/org" + org[4:] + "/" + obj,
		"extra segment":                  "state/" + org + "/" + ws + "/extra/" + sv + "-" + obj + ".tfstate",
		"extra trailing segment":         artifact + "/" + obj,
		"missing kind":                   "runs/" + org + "/" + run + "/" + obj,
		"missing version":                "policy-versions/" + org + "/" + obj,
		"uppercase key":                  strings.ToUpper(state),
		"uppercase root":                 "State" + strings.TrimPrefix(state, "state"),
		"valid shape, unknown kind":      blobkey.RunArtifact(org, run, "report"),
		"log segment holding an object":  "runs/" + org + "/" + run + "/log/" + obj,
		"artifact holding a log segment": "runs/" + org + "/" + run + "/plan_file/" + seg,
		"traversal":                      "state/" + org + "/../../" + ws + "/" + sv + "-" + obj + ".tfstate",
		"traversal after a key":          artifact + "/../../../etc/passwd",
		"constructor given traversal":    blobkey.State("../"+org, ws+"/..", sv),
		"state with a json suffix":       "state/" + org + "/" + ws + "/" + sv + "-" + obj + ".json",
		"state json with a state suffix": "state/" + org + "/" + ws + "/" + sv + "-" + id.New("json") + ".tfstate",
		"backup of a state":              state + ".bak",
		"state without its version":      "state/" + org + "/" + ws + "/" + obj + ".tfstate",
		"an older state layout":          "state/" + org + "/" + ws + "/" + sv + ".tfstate",
		"leading slash":                  "/" + state,
		"trailing slash":                 state + "/",
		"double slash":                   strings.Replace(artifact, "/", "//", 1),
		"under another prefix":           "other-team/" + state,
		"trailing newline":               state + "\n",
		"unknown root":                   "backups/" + org + "/" + obj,
		"root alone":                     "state/" + org,
		"empty":                          "",
	} {
		if blobkey.Recognised(key) {
			t.Errorf("%s: %q is recognised as Cairn's", name, key)
		}
	}
}

func TestParsePrefix(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"":                   "",
		"cairn":              "cairn",
		"cairn/":             "cairn",
		"teams/Cairn-prod/":  "teams/Cairn-prod",
		"a/b.c/d_e/f-g/v1.2": "a/b.c/d_e/f-g/v1.2",
		".cairn":             ".cairn",
		strings.Repeat("a", blobkey.MaxPrefixBytes): strings.Repeat("a", blobkey.MaxPrefixBytes),
	} {
		if got, err := blobkey.ParsePrefix(raw); err != nil || got != want {
			t.Errorf("ParsePrefix(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
	for _, raw := range []string{
		"/", "/cairn", "cairn//", "a//b", "//", "../cairn", "a/../b", "a/..", "./a", "a/./b", ".",
		"a b", `a\b`, "a?b", "a%2Fb", "cäirn", "a\n", "a/*",
		strings.Repeat("a", blobkey.MaxPrefixBytes+1),
	} {
		if got, err := blobkey.ParsePrefix(raw); err == nil {
			t.Errorf("ParsePrefix(%q) = %q, want a refusal", raw, got)
		}
	}
}
