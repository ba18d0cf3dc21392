package cairn.v1_test

import data.cairn.v1

mock_input(changes) := {
	"version": "cairn.policy.input/v1",
	"run": {"id": "run_test", "kind": "manual"},
	"source": {"commit_sha": null, "repository_id": "cfg_test", "working_directory": ""},
	"workspace": {"id": "ws_test", "metadata": {"name": "test", "project_id": "prj_test", "organization_id": "org_test"}},
	"resource_changes": changes,
}

change(address, actions) := {
	"address": address,
	"type": "terraform_data",
	"provider_name": "terraform.io/builtin/terraform",
	"change": {"actions": actions, "before": null, "after": {"input": null}, "before_sensitive": false, "after_sensitive": {}},
}

flagged(addresses) := {f.resource_address | some f in d.findings} if {
	d := v1.decision with input as mock_input([change(a, ["create"]) | some a in addresses])
}

test_snake_case_names_pass if {
	addresses := [
		"terraform_data.web",
		"terraform_data.web_server",
		"terraform_data.web_server_2",
		"terraform_data.a1b2",
		"module.Network.terraform_data.subnet_a",
		"terraform_data.web[0]",
		`terraform_data.web["Eu.West-1"]`,
	]
	flagged(addresses) == set()
}

test_bad_names_are_flagged if {
	addresses := [
		"terraform_data.WebServer",
		"terraform_data.webServer",
		"terraform_data.web-server",
		"terraform_data.web__server",
		"terraform_data._web",
		"terraform_data.web_",
		"terraform_data.2web",
		"module.net.terraform_data.Subnet[3]",
	]
	flagged(addresses) == {a | some a in addresses}
}

test_resource_name_extraction if {
	v1.resource_name("terraform_data.web") == "web"
	v1.resource_name("module.a.module.b.terraform_data.web_server[12]") == "web_server"
	v1.resource_name(`terraform_data.Web["a.b[0]"]`) == "Web"
	v1.resource_name("data.terraform_data.lookup") == "lookup"
}

test_finding_shape if {
	d := v1.decision with input as mock_input([change("terraform_data.WebServer", ["create"])])
	d == {"findings": [{
		"id": "advisory-naming/terraform_data.WebServer",
		"title": "Resource name is not snake_case",
		"message": `terraform_data.WebServer: resource name "WebServer" should be lowercase snake_case (for example "web_server").`,
		"resource_address": "terraform_data.WebServer",
		"details": {"name": "WebServer", "suggested_name": "web_server"},
	}]}
}

test_deleted_and_forgotten_resources_are_ignored if {
	changes := [
		change("terraform_data.OldOne", ["delete"]),
		change("terraform_data.Legacy", ["forget"]),
	]
	v1.decision == {"findings": []} with input as mock_input(changes)
}

test_replaced_and_unchanged_resources_are_checked if {
	changes := [
		change("terraform_data.Replaced", ["delete", "create"]),
		change("terraform_data.Kept", ["no-op"]),
	]
	d := v1.decision with input as mock_input(changes)
	[f.id | some f in d.findings] == ["advisory-naming/terraform_data.Kept", "advisory-naming/terraform_data.Replaced"]
}
