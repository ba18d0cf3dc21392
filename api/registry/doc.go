// Package registry is the organization's private module registry: modules
// addressed as namespace/name/provider (the namespace is the
// organization's /api/v2 name), their semver versions, and each version's
// archive, validated and sealed like a configuration archive, with what
// terraform-config-inspect read from it (README, inputs, outputs,
// resources). Versions are immutable once published; deprecation and
// revocation follow HCP Terraform's rules and are the only changes a
// published version takes. Every mutation commits with its audit event;
// every lookup is scoped to the principal's organization, so another
// organization's module is exactly as missing as one that never existed.
package registry
