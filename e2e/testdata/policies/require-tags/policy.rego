# require-tags: every terraform_data resource that is created or updated must
# carry the owner and env tags, so that spend and on-call ownership can always
# be traced back to a team and an environment.
package cairn.v1

import data.cairn.lib

required_tags := ["owner", "env"]

# Tags of the planned object. In the e2e configurations the only resource type
# is terraform_data, whose arbitrary payload lives under after.input, so that
# is where tags are expected. Anything that is not an object counts as "no
# tags" (for instance a sensitive or unknown value, which the plan shows as
# null).
planned_tags(rc) := tags if {
	tags := rc.change.after.input.tags
	is_object(tags)
} else := {}

# Required tags that are absent, not strings, or blank, in declaration order.
missing_tags(rc) := [name |
	some name in required_tags

	# object.get yields null for an absent tag; a bare tags[name] would be
	# undefined and silently skip exactly the tags we are looking for.
	value := object.get(planned_tags(rc), name, null)
	not lib.non_empty_string(value)
]

# Missing tags keyed by offending address, so each resource yields exactly one
# finding. (Deposed objects can repeat an address, but they are only ever
# deleted and so never reach this rule.)
offenders[rc.address] := missing if {
	some rc in input.resource_changes
	rc.type == "terraform_data"
	lib.configures(rc)
	missing := missing_tags(rc)
	count(missing) > 0
}

findings := [finding |
	some address in sort(object.keys(offenders))
	missing := offenders[address]
	finding := {
		"id": sprintf("require-tags/%s", [address]),
		"title": "Required tags are missing",
		"message": sprintf(
			"%s must set non-empty tag(s) %s under input.tags; missing: %s.",
			[address, concat(" and ", required_tags), concat(", ", missing)],
		),
		"resource_address": address,
		"details": {"missing_tags": missing},
	}
]

decision := {"findings": findings}
