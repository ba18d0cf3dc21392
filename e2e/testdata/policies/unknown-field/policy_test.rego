package cairn.v1_test

import data.cairn.v1

mock_input(actions) := {
	"version": "cairn.policy.input/v1",
	"run": {"id": "run_test", "kind": "manual"},
	"source": {"commit_sha": null, "repository_id": "cfg_test", "working_directory": ""},
	"workspace": {"id": "ws_test", "metadata": {"name": "test", "project_id": "prj_test", "organization_id": "org_test"}},
	"resource_changes": [{
		"address": "terraform_data.web",
		"type": "terraform_data",
		"provider_name": "terraform.io/builtin/terraform",
		"change": {"actions": actions, "before": {}, "after": {}, "before_sensitive": false, "after_sensitive": {}},
	}],
}

# These tests pass: OPA has no idea about Cairn's decision contract. Only the
# evaluation in Cairn rejects the extra key.
test_no_replacement if {
	v1.decision == {"findings": [], "score": 10} with input as mock_input(["update"])
}

test_replacement_is_reported if {
	d := v1.decision with input as mock_input(["create", "delete"])
	[f.id | some f in d.findings] == ["replacement/terraform_data.web"]
	d.score == 9
}
