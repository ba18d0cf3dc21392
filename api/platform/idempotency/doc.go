// Package idempotency makes retried /v1 mutations safe. A key is reserved
// with a transaction-scoped advisory lock, so a concurrent duplicate learns
// at once that the first is still running; the mutation and its stored
// response then commit in that same transaction. A later retry with the same
// input (method, route, resolved path, query and canonical body) gets the
// stored status and body back, one with different input is a conflict, and
// records are forgotten 24 hours after first reservation. Stored responses
// are sealed to their record, since some carry a secret shown only once.
package idempotency
