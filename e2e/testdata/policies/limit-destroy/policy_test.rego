package cairn.v1_test

import data.cairn.v1

mock_input(changes) := {
	"version": "cairn.policy.input/v1",
	"run": {"id": "run_test", "kind": "tracked"},
	"source": {"commit_sha": null, "repository_id": "cfg_test", "working_directory": ""},
	"workspace": {"id": "ws_test", "metadata": {"name": "test", "project_id": "prj_test", "organization_id": "org_test"}},
	"resource_changes": changes,
}

change(address, actions) := {
	"address": address,
	"type": "terraform_data",
	"provider_name": "terraform.io/builtin/terraform",
	"change": {"actions": actions, "before": null, "after": null, "before_sensitive": false, "after_sensitive": false},
}

# n plain deletes named terraform_data.d0 .. d(n-1).
deletes(n) := [change(sprintf("terraform_data.d%d", [i]), ["delete"]) | some i in numbers.range(0, n - 1)]

test_no_changes_pass if {
	v1.decision == {"findings": []} with input as mock_input([])
}

test_creates_updates_and_forgets_do_not_count if {
	changes := [
		change("terraform_data.a", ["create"]),
		change("terraform_data.b", ["update"]),
		change("terraform_data.c", ["forget"]),
		change("terraform_data.d", ["no-op"]),
		change("terraform_data.e", ["read"]),
	]
	v1.decision == {"findings": []} with input as mock_input(changes)
}

test_exactly_the_limit_passes if {
	v1.decision == {"findings": []} with input as mock_input(deletes(2))
}

test_one_over_the_limit_fails if {
	d := v1.decision with input as mock_input(deletes(3))
	d == {"findings": [{
		"id": "limit-destroy/too-many-deletions",
		"title": "Too many resources deleted in one run",
		"message": "This run deletes 3 resources (including replacements); at most 2 may be deleted in one run.",
		"details": {
			"deletions": 3,
			"max_deletions": 2,
			"addresses": ["terraform_data.d0", "terraform_data.d1", "terraform_data.d2"],
		},
	}]}
}

test_replacements_count_as_deletions if {
	changes := [
		change("terraform_data.a", ["delete", "create"]),
		change("terraform_data.b", ["create", "delete"]),
		change("terraform_data.c", ["delete"]),
	]
	d := v1.decision with input as mock_input(changes)
	count(d.findings) == 1
	d.findings[0].details.deletions == 3
}

test_finding_has_no_resource_address if {
	d := v1.decision with input as mock_input(deletes(5))
	not "resource_address" in object.keys(d.findings[0])
}

test_listed_addresses_are_capped if {
	d := v1.decision with input as mock_input(deletes(25))
	d.findings[0].details.deletions == 25
	count(d.findings[0].details.addresses) == 10
}

test_limit_is_a_constant if {
	v1.max_deletions == 2
}
