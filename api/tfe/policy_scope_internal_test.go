package tfe

import (
	"testing"

	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/api/run"
)

// TestPolicyCheckScope (SPEC §4 GET /api/v2/policy-checks/{id}): a check
// is organization-scoped only when every result (or, while it runs, every
// snapshotted attachment) is an organization attachment's; project and
// workspace results report workspace, and so does a check with none.
func TestPolicyCheckScope(t *testing.T) {
	t.Parallel()
	results := func(scopes ...string) []policy.Result {
		out := []policy.Result{}
		for _, s := range scopes {
			out = append(out, policy.Result{Scope: s})
		}
		return out
	}
	snapshot := func(scopes ...string) []policy.SnapshotEntry {
		out := []policy.SnapshotEntry{}
		for _, s := range scopes {
			out = append(out, policy.SnapshotEntry{Scope: s})
		}
		return out
	}
	org, project, ws := policy.ScopeOrganization, policy.ScopeProject, policy.ScopeWorkspace
	for _, tc := range []struct {
		name   string
		review run.PolicyReview
		want   string
	}{
		{"organization results", run.PolicyReview{Results: results(org, org)}, "organization"},
		{"an organization result", run.PolicyReview{Results: results(org)}, "organization"},
		{"organization and project results", run.PolicyReview{Results: results(org, project)}, "workspace"},
		{"organization and workspace results", run.PolicyReview{Results: results(org, org, ws)}, "workspace"},
		{"project results", run.PolicyReview{Results: results(project)}, "workspace"},
		{"workspace results", run.PolicyReview{Results: results(ws)}, "workspace"},
		{"no results", run.PolicyReview{}, "workspace"},
		{"running: organization attachments", run.PolicyReview{Snapshot: snapshot(org, org)}, "organization"},
		{"running: a project attachment too", run.PolicyReview{Snapshot: snapshot(org, project)}, "workspace"},
	} {
		if got := policyScope(tc.review); got != tc.want {
			t.Errorf("%s: scope %s, want %s", tc.name, got, tc.want)
		}
	}
}
