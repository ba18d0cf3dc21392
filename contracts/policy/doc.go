// Package policycontract carries the committed Rego capabilities manifest,
// cairn-rego-capabilities-v1.json, and its SHA-256. The manifest is a
// contract: every policy build and every evaluation compiles against exactly
// these bytes, and the digest is recorded with each policy version and bound
// into each evaluation, so the file is generated (see
// api/policy/rego/internal/capgen) and never edited by hand. Embedding both
// files keeps the digest check independent of the working directory a binary
// runs in.
package policycontract
