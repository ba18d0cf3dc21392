package cairn.v1_test

import data.cairn.v1

mock_input(changes) := {
	"version": "cairn.policy.input/v1",
	"run": {"id": "run_test", "kind": "speculative"},
	"source": {"commit_sha": null, "repository_id": "cfg_test", "working_directory": ""},
	"workspace": {"id": "ws_test", "metadata": {"name": "test", "project_id": "prj_test", "organization_id": "org_test"}},
	"resource_changes": changes,
}

# A terraform_data change with the given after-sensitivity mask. The values
# themselves do not matter to this policy (sensitive ones are null anyway).
change(address, mask) := {
	"address": address,
	"type": "terraform_data",
	"provider_name": "terraform.io/builtin/terraform",
	"change": {
		"actions": ["create"],
		"before": null,
		"after": {"input": {}, "triggers_replace": null},
		"before_sensitive": false,
		"after_sensitive": mask,
	},
}

paths_of(d) := [f.details.paths | some f in d.findings]

test_nothing_sensitive_passes if {
	changes := [
		change("terraform_data.a", {}),
		change("terraform_data.b", false),
		change("terraform_data.c", {"input": {"tags": {}, "list": [false, false]}}),
	]
	v1.decision == {"findings": []} with input as mock_input(changes)
}

test_credential_keys_pass_at_any_depth if {
	mask := {"input": {
		"password": true,
		"db": {"secret": true, "replicas": [{"token": true}]},
		"tags": {},
	}}
	v1.decision == {"findings": []} with input as mock_input([change("terraform_data.a", mask)])
}

test_whole_credential_object_may_be_sensitive if {
	mask := {"input": {"secret": true}}
	v1.decision == {"findings": []} with input as mock_input([change("terraform_data.a", mask)])
}

test_sensitive_description_fails if {
	mask := {"input": {"description": true, "password": true, "tags": {}}}
	d := v1.decision with input as mock_input([change("terraform_data.notes", mask)])
	d == {"findings": [{
		"id": "no-sensitive-leak/terraform_data.notes",
		"title": "Sensitive value outside a credential field",
		"message": "terraform_data.notes receives a sensitive value at after.input.description; sensitive values are only allowed in input keys named password, secret, token.",
		"resource_address": "terraform_data.notes",
		"details": {"paths": ["after.input.description"]},
	}]}
}

test_whole_input_sensitive_fails if {
	d := v1.decision with input as mock_input([change("terraform_data.a", {"input": true})])
	paths_of(d) == [["after.input"]]
}

test_whole_after_sensitive_fails if {
	d := v1.decision with input as mock_input([change("terraform_data.a", true)])
	paths_of(d) == [["after"]]
}

test_sensitive_outside_input_fails if {
	# A credential key name only helps inside input.
	mask := {"input": {}, "triggers_replace": {"token": true}}
	d := v1.decision with input as mock_input([change("terraform_data.a", mask)])
	paths_of(d) == [["after.triggers_replace.token"]]
}

test_nested_paths_are_reported_once_per_resource if {
	mask := {"input": {
		"password": true,
		"tags": {"owner": true},
		"list": [false, {"note": true}],
		"items": [true],
	}}
	d := v1.decision with input as mock_input([change("terraform_data.a", mask)])
	count(d.findings) == 1
	paths_of(d) == [["after.input.items[0]", "after.input.list[1].note", "after.input.tags.owner"]]
}

test_other_resource_types_are_ignored if {
	rc := object.union(change("null_resource.a", {"triggers": true}), {"type": "null_resource"})
	v1.decision == {"findings": []} with input as mock_input([rc])
}

test_findings_sorted_by_address if {
	changes := [
		change("terraform_data.b", {"input": true}),
		change("terraform_data.a", {"input": {"description": true}}),
	]
	d := v1.decision with input as mock_input(changes)
	[f.resource_address | some f in d.findings] == ["terraform_data.a", "terraform_data.b"]
}
