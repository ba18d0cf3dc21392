# allocating-test: a harmless policy whose test builds an endless string
# inside one built-in call; the build's memory ceiling fails it with
# policy_build_limit_exceeded.
package cairn.v1

decision := {"findings": []}
