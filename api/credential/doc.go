// Package credential is a workspace's access to clouds and secrets: profiles
// and their immutable versions (workload-identity federation to AWS, GCP and
// Azure, or a write-only map of environment variables), their lifecycle
// (verify and make current, archive, revoke), the snapshot a run pins, the
// one-time handle a phase attempt is issued when it starts, its redemption
// by the worker inside sandbox start, and Cairn's OIDC issuer, whose
// short-lived tokens the clouds exchange for their own credentials. A
// secret is sealed before it is stored, never returned by any read, and
// unsealed only for a sandbox that already exists.
package credential
