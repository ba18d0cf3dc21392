// Package secret derives purpose-bound keys from AUTH_SECRET, so that the
// one configured secret can key session hashes, cursor MACs and idempotency
// fingerprints without any two uses sharing a key.
package secret
