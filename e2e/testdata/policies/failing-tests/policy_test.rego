package cairn.v1_test

import data.cairn.v1

mock_input(replicas) := {
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
			"after": {"input": {"replicas": replicas}},
			"before_sensitive": false,
			"after_sensitive": {},
		},
	}],
}

test_below_limit_passes if {
	v1.decision == {"findings": []} with input as mock_input(2)
}

# Fails against the buggy policy: 5 replicas is within the limit.
test_at_limit_passes if {
	v1.decision == {"findings": []} with input as mock_input(5)
}

test_above_limit_fails if {
	d := v1.decision with input as mock_input(6)
	[f.id | some f in d.findings] == ["limit-replicas/terraform_data.web"]
}
