# unknown-field: reports every replaced terraform_data resource, and also
# returns a "score" next to the findings.
#
# The set compiles and its tests pass, so it publishes, but the decision
# contract allows only the "findings" key. Every evaluation of this set is
# therefore an error (and an error blocks the apply). It exists to exercise
# that path end to end.
package cairn.v1

replaced contains rc.address if {
	some rc in input.resource_changes
	rc.type == "terraform_data"
	"delete" in rc.change.actions
	"create" in rc.change.actions
}

findings := [finding |
	some address in sort(replaced)
	finding := {
		"id": sprintf("replacement/%s", [address]),
		"title": "Resource is replaced",
		"message": sprintf("%s is destroyed and recreated by this run.", [address]),
		"resource_address": address,
	}
]

# Not part of the decision contract: makes every result invalid.
score := 10 - count(findings)

decision := {"findings": findings, "score": score}
