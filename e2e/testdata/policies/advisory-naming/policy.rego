# advisory-naming: resource names should be lowercase snake_case, the usual
# OpenTofu convention. This is style, not safety, so the set is meant to be
# attached as advisory: findings are reported but do not block an apply.
package cairn.v1

snake_case := `^[a-z][a-z0-9]*(_[a-z0-9]+)*$`

# Instance keys such as [0] or ["eu-west.1"] are not part of the name, and a
# string key may itself contain dots, so strip a trailing key first.
instance_key := `\[(\d+|"(?:[^"\\]|\\.)*")\]$`

# The resource name: the part after the last "." of the address, ignoring
# the instance key. module.net.terraform_data.WebServer[0] -> WebServer.
resource_name(address) := name if {
	base := regex.replace(address, instance_key, "")
	parts := split(base, ".")
	name := parts[count(parts) - 1]
}

# A best-effort snake_case spelling to put in the finding: split camelCase
# humps, turn dashes into underscores, lowercase everything.
suggestion(name) := lower(replace(regex.replace(name, `([a-z0-9])([A-Z])`, "${1}_${2}"), "-", "_"))

# Resources that will not exist after the apply are not worth renaming.
going_away(rc) if rc.change.actions == ["delete"]

going_away(rc) if rc.change.actions == ["forget"]

violations[rc.address] := name if {
	some rc in input.resource_changes
	not going_away(rc)
	name := resource_name(rc.address)
	not regex.match(snake_case, name)
}

findings := [finding |
	some address in sort(object.keys(violations))
	name := violations[address]
	finding := {
		"id": sprintf("advisory-naming/%s", [address]),
		"title": "Resource name is not snake_case",
		"message": sprintf(
			"%s: resource name %q should be lowercase snake_case (for example %q).",
			[address, name, suggestion(name)],
		),
		"resource_address": address,
		"details": {"name": name, "suggested_name": suggestion(name)},
	}
]

decision := {"findings": findings}
