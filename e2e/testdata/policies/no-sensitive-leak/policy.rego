# no-sensitive-leak: sensitive values may only flow into terraform_data inputs
# under keys that obviously hold credentials (password, secret, token). A
# sensitive value anywhere else under "after" usually means a secret variable
# ended up in a description, a tag or a trigger, where people and tooling do
# not expect it and may copy it around.
package cairn.v1

# Key names at which a sensitive value is expected, at any depth of input.
allowed_keys := {"password", "secret", "token"}

# Paths (arrays of keys/indices relative to "after") whose sensitivity mask is
# true. walk visits every node of the mask, so nested objects and lists are
# covered; a mask of plain true (the whole object is sensitive) yields the
# empty path.
sensitive_paths(rc) := {path |
	walk(rc.change.after_sensitive, [path, mask])
	mask == true
}

allowed(path) if {
	count(path) >= 2
	path[0] == "input"
	path[count(path) - 1] in allowed_keys
}

# Renders ["input", "list", 0, "x"] as after.input.list[0].x.
render(path) := concat("", array.concat(["after"], [segment(key) | some key in path]))

segment(key) := sprintf("[%d]", [key]) if is_number(key)

else := concat("", [".", key])

leaks[rc.address] := paths if {
	some rc in input.resource_changes
	rc.type == "terraform_data"
	paths := sort([render(path) |
		some path in sensitive_paths(rc)
		not allowed(path)
	])
	count(paths) > 0
}

findings := [finding |
	some address in sort(object.keys(leaks))
	paths := leaks[address]
	finding := {
		"id": sprintf("no-sensitive-leak/%s", [address]),
		"title": "Sensitive value outside a credential field",
		"message": sprintf(
			"%s receives a sensitive value at %s; sensitive values are only allowed in input keys named %s.",
			[address, concat(", ", paths), concat(", ", sort(allowed_keys))],
		),
		"resource_address": address,
		"details": {"paths": paths},
	}
]

decision := {"findings": findings}
