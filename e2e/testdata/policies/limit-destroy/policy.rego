# limit-destroy: a single run may delete at most max_deletions resources.
# Large destroys are usually a mistake (a renamed module, a wrong workspace),
# so anything bigger should be split up or done deliberately elsewhere.
package cairn.v1

max_deletions := 2

# Addresses of every resource the plan deletes, of any type. Replacements
# (["delete", "create"] and ["create", "delete"]) count too: the old object
# is destroyed either way.
deletions contains rc.address if {
	some rc in input.resource_changes
	"delete" in rc.change.actions
}

# Only a handful of addresses go into details so the finding stays small
# even for a plan that destroys hundreds of resources.
max_listed := 10

findings := [finding] if {
	count(deletions) > max_deletions
	addresses := sort(deletions)
	finding := {
		"id": "limit-destroy/too-many-deletions",
		"title": "Too many resources deleted in one run",
		"message": sprintf(
			"This run deletes %d resources (including replacements); at most %d may be deleted in one run.",
			[count(deletions), max_deletions],
		),
		"details": {
			"deletions": count(deletions),
			"max_deletions": max_deletions,
			"addresses": array.slice(addresses, 0, max_listed),
		},
	}
} else := []

decision := {"findings": findings}
