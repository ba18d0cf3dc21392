// Package team is teams: organization-scoped groups of members with HCP
// Terraform's organization-access flags, and their access to workspaces
// and projects. What a grant allows is decided by the one mapping in
// api/access; this package stores teams and grants, audits every change in
// the caller's transaction, and resolves a member's grants (GrantsOf) on
// every authenticated request so that a revocation narrows the next one.
package team
