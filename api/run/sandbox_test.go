package run

import "testing"

func TestBaseProfileNamesTheWeakestIsolationThatRan(t *testing.T) {
	t.Parallel()
	with := func(isolations ...string) []Attempt {
		var out []Attempt
		for _, iso := range isolations {
			if iso == "" {
				out = append(out, Attempt{})
				continue
			}
			out = append(out, Attempt{SandboxProfile: &SandboxProfile{Driver: "local", Isolation: iso}})
		}
		return out
	}
	for _, tc := range []struct {
		attempts []Attempt
		want     string
		ok       bool
	}{
		{nil, "", false},
		{with(""), "", false},
		{with("", SandboxNamespaces), "local-namespaces", true},
		{with(SandboxNamespaces, SandboxNamespaces), "local-namespaces", true},
		{with(SandboxUnisolated), "local-unisolated", true},
		{with(SandboxNamespaces, SandboxUnisolated), "local-unisolated", true},
		{with(SandboxUnisolated, SandboxNamespaces), "local-unisolated", true},
		{with(SandboxUnavailable), "local-isolation-unavailable", true},
		{with(SandboxNamespaces, SandboxUnavailable), "local-namespaces", true},
		{with(SandboxUnavailable, SandboxUnisolated), "local-unisolated", true},
		{with(SandboxNamespaces, "gvisor"), "local-unknown", true},
	} {
		got, ok := BaseProfile(tc.attempts)
		if got != tc.want || ok != tc.ok {
			t.Errorf("BaseProfile(%v) = %q, %v; want %q, %v", tc.attempts, got, ok, tc.want, tc.ok)
		}
	}
}
