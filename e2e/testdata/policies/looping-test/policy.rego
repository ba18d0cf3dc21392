# looping-test: a harmless policy whose test loops inside one built-in
# call, which the per-test timeout cannot interrupt; the build's CPU-time
# limit fails it with policy_build_limit_exceeded.
package cairn.v1

decision := {"findings": []}
