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

// TestUntrustedRunPageSaysWhatWasWithheld: an agent's run says why its plan
// got nothing secret and offers Run with credentials to whom may release
// it; once released it names the person's run, which links back.
func TestUntrustedRunPageSaysWhatWasWithheld(t *testing.T) {
	t.Parallel()
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	render := func(p runPage) string {
		t.Helper()
		clone, _ := s.pages.Clone()
		if _, err := clone.ParseFS(web.Templates, "templates/run.html"); err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		if err := clone.ExecuteTemplate(&out, "layout", frame{Page: p, CSRF: "csrf-x"}); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	var proposal runReview
	proposal.ID, proposal.Status, proposal.Kind = "run_agent", "planned_and_finished", "plan_only"
	proposal.Untrusted = &untrustedReview{Reason: "agent", Withheld: []string{"state", "sensitive_variables"}}
	offered := render(runPage{Run: proposal, Can: map[string]bool{"release": true}, Stages: stagesOf(proposal)})
	for _, want := range []string{`id="untrusted"`, "Proposed by an agent", "ran without the workspace", `action="/runs/run_agent/release"`,
		"Run with credentials", `value="csrf-x"`} {
		if !strings.Contains(offered, want) {
			t.Errorf("an agent's run page lacks %s", want)
		}
	}
	if page := render(runPage{Run: proposal, Can: map[string]bool{}, Stages: stagesOf(proposal)}); strings.Contains(page, `id="release"`) ||
		!strings.Contains(page, `id="untrusted"`) {
		t.Error("a run page offers the release to someone who may not release it")
	}
	name := "Ada"
	proposal.Untrusted.Release = &releaseReview{RunID: "run_person", ActorID: "usr_ada", ActorName: &name}
	if page := render(runPage{Run: proposal, Can: map[string]bool{"release": true}, Stages: stagesOf(proposal)}); strings.Contains(page, `id="release"`) ||
		!strings.Contains(page, `Released by Ada as <a href="/runs/run_person">`) {
		t.Errorf("a released agent run page:\n%s", page)
	}
	var released runReview
	released.ID, released.Status, released.Kind = "run_person", "planning", "plan_only"
	from := "run_agent"
	released.ReleasedFromRunID = &from
	if page := render(runPage{Run: released, Can: map[string]bool{}, Stages: stagesOf(released)}); strings.Contains(page, `id="untrusted"`) ||
		!strings.Contains(page, `id="released-from"`) || !strings.Contains(page, `href="/runs/run_agent"`) {
		t.Error("a released run page does not link to the agent's run")
	}
	var fork runReview
	fork.ID, fork.Status, fork.Kind = "run_fork", "planned_and_finished", "speculative"
	fork.Untrusted = &untrustedReview{Reason: "fork_pull_request"}
	if page := render(runPage{Run: fork, Can: map[string]bool{"release": true}, Stages: stagesOf(fork)}); !strings.Contains(page, "From a pull request of a fork") {
		t.Error("a fork's run page does not say where it came from")
	}
}
