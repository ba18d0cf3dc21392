# failing-tests: caps the "replicas" setting of terraform_data resources at
# max_replicas to keep test environments cheap.
#
# This set is deliberately NOT publishable: the comparison below has an
# off-by-one bug (>= instead of >), so a resource asking for exactly
# max_replicas is wrongly flagged. test_at_limit_passes in policy_test.rego
# catches it, and publishing runs the set's tests and refuses it.
package cairn.v1

max_replicas := 5

too_many[rc.address] := replicas if {
	some rc in input.resource_changes
	rc.type == "terraform_data"
	some action in rc.change.actions
	action in {"create", "update"}
	replicas := rc.change.after.input.replicas
	is_number(replicas)
	replicas >= max_replicas # BUG: should be >, the limit itself is allowed.
}

findings := [finding |
	some address in sort(object.keys(too_many))
	replicas := too_many[address]
	finding := {
		"id": sprintf("limit-replicas/%s", [address]),
		"title": "Too many replicas",
		"message": sprintf("%s asks for %d replicas; at most %d are allowed.", [address, replicas, max_replicas]),
		"resource_address": address,
		"details": {"replicas": replicas, "max_replicas": max_replicas},
	}
]

decision := {"findings": findings}
