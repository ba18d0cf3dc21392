# always-pass: the smallest valid set. The decision never has findings, which
# makes it handy for testing publishing, attachment and run plumbing without
# policy logic getting in the way.
package cairn.v1

decision := {"findings": []}
