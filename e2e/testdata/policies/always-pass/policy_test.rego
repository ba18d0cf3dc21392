package cairn.v1_test

import data.cairn.v1

test_passes_without_input if {
	v1.decision == {"findings": []}
}

test_passes_whatever_the_plan if {
	v1.decision == {"findings": []} with input as {
		"version": "cairn.policy.input/v1",
		"run": {"id": "run_test", "kind": "tracked"},
		"source": {"commit_sha": null, "repository_id": "cfg_test", "working_directory": ""},
		"workspace": {"id": "ws_test", "metadata": {"name": "test", "project_id": "prj_test", "organization_id": "org_test"}},
		"resource_changes": [{
			"address": "terraform_data.Anything",
			"type": "terraform_data",
			"provider_name": "terraform.io/builtin/terraform",
			"change": {"actions": ["delete"], "before": {}, "after": null, "before_sensitive": false, "after_sensitive": true},
		}],
	}
}
