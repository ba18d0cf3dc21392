package cairn.v1_test

import data.cairn.v1

# Stand-in for the directory service's answer so the unit tests run offline.
# Replacing the known_teams rule (rather than mocking http.send) keeps the
# only reference to http.send in policy.rego.
teams := {"team-a", "team-b"}

mock_input(owner) := {
	"version": "cairn.policy.input/v1",
	"run": {"id": "run_test", "kind": "manual"},
	"source": {"commit_sha": null, "repository_id": "cfg_test", "working_directory": ""},
	"workspace": {"id": "ws_test", "metadata": {"name": "test", "project_id": "prj_test", "organization_id": "org_test"}},
	"resource_changes": [{
		"address": "terraform_data.web",
		"type": "terraform_data",
		"provider_name": "terraform.io/builtin/terraform",
		"change": {
			"actions": ["create"],
			"before": null,
			"after": {"input": {"tags": {"owner": owner, "env": "prod"}}},
			"before_sensitive": false,
			"after_sensitive": {},
		},
	}],
}

test_known_owner_passes if {
	d := v1.decision with input as mock_input("team-a") with v1.known_teams as teams
	d == {"findings": []}
}

test_unknown_owner_fails if {
	d := v1.decision with input as mock_input("team-z") with v1.known_teams as teams
	[f.id | some f in d.findings] == ["owner-allowlist/terraform_data.web"]
}
