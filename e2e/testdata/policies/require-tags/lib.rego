# Small helpers shared by the rules in this set. Kept in their own package to
# show that a set may carry helper packages next to cairn.v1.
package cairn.lib

# A change leaves the resource with new or changed configuration when it
# creates it (plain create or either replace ordering) or updates it in place.
# Deletes, reads, forgets and no-ops do not introduce configuration to check.
configures(rc) if "create" in rc.change.actions

configures(rc) if "update" in rc.change.actions

# True when value is a string with something other than whitespace in it.
non_empty_string(value) if {
	is_string(value)
	trim_space(value) != ""
}
