package cairn.v1_test

import data.cairn.v1

# Builds a minimal policy input holding the given resource changes.
mock_input(changes) := {
	"version": "cairn.policy.input/v1",
	"run": {"id": "run_test", "kind": "speculative"},
	"source": {"commit_sha": null, "repository_id": "cfg_test", "working_directory": ""},
	"workspace": {"id": "ws_test", "metadata": {"name": "test", "project_id": "prj_test", "organization_id": "org_test"}},
	"resource_changes": changes,
}

change(address, actions, after) := {
	"address": address,
	"type": "terraform_data",
	"provider_name": "terraform.io/builtin/terraform",
	"change": {
		"actions": actions,
		"before": null,
		"after": after,
		"before_sensitive": false,
		"after_sensitive": {},
	},
}

tagged(tags) := {"input": {"tags": tags}, "triggers_replace": null}

good_tags := {"owner": "team-a", "env": "prod"}

test_tagged_create_passes if {
	v1.decision == {"findings": []} with input as mock_input([change("terraform_data.web", ["create"], tagged(good_tags))])
}

test_extra_tags_are_fine if {
	tags := object.union(good_tags, {"cost_center": "42"})
	v1.decision == {"findings": []} with input as mock_input([change("terraform_data.web", ["update"], tagged(tags))])
}

test_empty_plan_passes if {
	v1.decision == {"findings": []} with input as mock_input([])
}

test_deletes_and_no_ops_are_ignored if {
	changes := [
		change("terraform_data.gone", ["delete"], null),
		change("terraform_data.same", ["no-op"], {"input": {"size": 1}}),
		change("terraform_data.dropped", ["forget"], null),
	]
	v1.decision == {"findings": []} with input as mock_input(changes)
}

test_other_resource_types_are_ignored if {
	rc := object.union(change("null_resource.x", ["create"], {}), {"type": "null_resource"})
	v1.decision == {"findings": []} with input as mock_input([rc])
}

test_create_without_tags_fails if {
	d := v1.decision with input as mock_input([change("terraform_data.web", ["create"], {"input": {"size": 3}})])
	d == {"findings": [{
		"id": "require-tags/terraform_data.web",
		"title": "Required tags are missing",
		"message": "terraform_data.web must set non-empty tag(s) owner and env under input.tags; missing: owner, env.",
		"resource_address": "terraform_data.web",
		"details": {"missing_tags": ["owner", "env"]},
	}]}
}

test_null_input_fails if {
	d := v1.decision with input as mock_input([change("terraform_data.web", ["create"], {"input": null})])
	d.findings[0].details.missing_tags == ["owner", "env"]
}

test_blank_and_non_string_values_fail if {
	changes := [
		change("terraform_data.blank", ["create"], tagged({"owner": "  ", "env": "prod"})),
		change("terraform_data.number", ["update"], tagged({"owner": "team-a", "env": 1})),
	]
	d := v1.decision with input as mock_input(changes)
	[f.resource_address | some f in d.findings] == ["terraform_data.blank", "terraform_data.number"]
	d.findings[0].details.missing_tags == ["owner"]
	d.findings[1].details.missing_tags == ["env"]
}

test_replace_is_checked if {
	d := v1.decision with input as mock_input([change("terraform_data.web", ["delete", "create"], tagged({"owner": "team-a"}))])
	count(d.findings) == 1
	d.findings[0].id == "require-tags/terraform_data.web"
	contains(d.findings[0].message, "missing: env.")
}

test_one_finding_per_resource if {
	changes := [
		change("terraform_data.b", ["create"], {"input": {}}),
		change("terraform_data.a", ["create"], {"input": {}}),
		change("terraform_data.ok", ["create"], tagged(good_tags)),
	]
	d := v1.decision with input as mock_input(changes)
	[f.id | some f in d.findings] == ["require-tags/terraform_data.a", "require-tags/terraform_data.b"]
}
