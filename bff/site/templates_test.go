package site

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/web"
)

// TestEveryPageParses parses each page with the layout, as render does, so
// a template error fails here rather than as a 500 in a browser.
func TestEveryPageParses(t *testing.T) {
	t.Parallel()
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	names, err := fs.Glob(web.Templates, "templates/*.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if strings.HasSuffix(name, "layout.html") {
			continue
		}
		clone, err := s.pages.Clone()
		if err == nil {
			_, err = clone.ParseFS(web.Templates, name)
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestRunPageRendersEveryPanel executes the run page with a recovery, a
// failure, outputs and downloads, and the first-run pages, so a template
// that parses but fails on data is caught too.
func TestRunPageRendersEveryPanel(t *testing.T) {
	t.Parallel()
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	digest, sv, reason, remaining := strings.Repeat("a", 64), "sv_1", "apply_canceled", 120
	var review runReview
	review.ID, review.Status, review.Kind, review.TerminalReason = "run_1", "recovery_required", "plan_and_apply", &reason
	review.Recovery = &struct {
		CurrentStateVersionID *string `json:"current_state_version_id"`
		CurrentStateDigest    string  `json:"current_state_digest"`
		EmergencyStateDigest  *string `json:"emergency_state_digest"`
	}{CurrentStateVersionID: &sv, CurrentStateDigest: digest, EmergencyStateDigest: &digest}
	review.LeaseRemainingSeconds = &remaining
	review.TargetAddrs, review.ReplaceAddrs, review.SavePlan = []string{`module.m.terraform_data.a["k"]`}, []string{"terraform_data.b"}, true
	review.Variables = append(review.Variables, struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	}{Key: "greeting", Value: `"hi"`})
	page := runPage{Run: review, Can: map[string]bool{"recover": true, "cancel": true}, Stages: stagesOf(review),
		Reason: "The apply was canceled.", FailedPhase: "apply", FinalLog: []string{"line"},
		State: &stateVersion{ID: sv, Serial: 3}, Outputs: []stateOutput{{Name: "web", Value: []byte(`"x"`)}, {Name: "secret", Sensitive: true}},
		Downloads: &downloads{Redacted: true, Restricted: []restrictedDownload{{Kind: "plan", Label: "Raw plan"}}}}
	var waiting runReview
	waiting.ID, waiting.Status, waiting.Kind = "run_2", "pending", "plan_and_apply"
	waiting.ForceExecuteDiscards = []string{"run_a", "run_b"}
	pending := runPage{Run: waiting, Can: map[string]bool{"cancel": true, "force_execute": true}, Stages: stagesOf(waiting)}
	for name, data := range map[string]any{
		"run.html":             page,
		"pending run":          pending,
		"changes.html":         renderChanges("run_1", planChanges{Resources: []changedResource{{Address: "a.b", Action: "create", After: []byte(`{"x":1}`)}}}),
		"welcome.html":         welcomePage{Step: "ready", Workspaces: []workspaceRef{{ID: "ws_1", Name: "demo"}}},
		"workspace-start.html": startPage{Token: "cut_x", Hostname: "localhost:8080", Can: map[string]bool{"run": true}},
	} {
		file := name
		if name == "pending run" {
			file = "run.html"
		}
		clone, _ := s.pages.Clone()
		if _, err := clone.ParseFS(web.Templates, "templates/"+file); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var out strings.Builder
		if err := clone.ExecuteTemplate(&out, "layout", frame{Page: data}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if name == "run.html" {
			for _, want := range []string{`id="recovery"`, "import_emergency_state", `id="outputs"`, "(sensitive value)", `id="downloads"`, `id="cancel"`, `id="final-log"`,
				`id="run-targets"`, `module.m.terraform_data.a[&#34;k&#34;]`, `id="run-replaces"`, `greeting = &#34;hi&#34;`, "no refresh · saved plan"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("run page lacks %s", want)
				}
			}
			if strings.Contains(out.String(), `id="force-execute"`) {
				t.Error("a run that cannot be force-executed offers Run this plan now")
			}
		}
		if name == "pending run" {
			// The confirmation names every run it discards.
			for _, want := range []string{`id="force-execute"`, "Run this plan now", `href="/runs/run_a"`, `href="/runs/run_b"`, "run_a</code></a>, <a href=\"/runs/run_b\""} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("pending run page lacks %s", want)
				}
			}
		}
	}
}
