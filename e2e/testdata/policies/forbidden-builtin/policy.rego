# forbidden-builtin: checks that the owner tag of every new terraform_data
# resource names a known team, fetching the list of teams from an internal
# directory service.
#
# This set is deliberately NOT publishable. Cairn only allows deterministic
# built-ins, because a decision must depend on the plan alone and be
# reproducible later; http.send is not in the allowed capabilities, so
# compiling this set fails at publish time. The allowlist belongs in the set
# itself (as data or a constant), not behind a network call.
package cairn.v1

directory_url := "https://teams.internal.example/api/v1/teams"

# Team slugs known to the directory service.
known_teams := {team.slug |
	response := http.send({
		"method": "GET",
		"url": directory_url,
		"force_json_decode": true,
		"timeout": "2s",
	})
	response.status_code == 200
	some team in response.body.teams
}

unknown_owner[rc.address] := owner if {
	some rc in input.resource_changes
	rc.type == "terraform_data"
	"create" in rc.change.actions
	owner := object.get(rc.change.after, ["input", "tags", "owner"], "")
	not owner in known_teams
}

findings := [finding |
	some address in sort(object.keys(unknown_owner))
	owner := unknown_owner[address]
	finding := {
		"id": sprintf("owner-allowlist/%s", [address]),
		"title": "Owner is not a known team",
		"message": sprintf("%s has owner tag %q, which is not a team in the directory.", [address, owner]),
		"resource_address": address,
	}
]

decision := {"findings": findings}
