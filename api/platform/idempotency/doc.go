// Package idempotency makes retried /v1 mutations safe. A key is reserved
// with a transaction-scoped advisory lock, so a concurrent duplicate learns
// at once that the first is still running; the mutation and its stored
// response then commit in that same transaction. A later retry with the same
// input gets the stored status and body back, one with different input is a
// conflict, and records are forgotten 24 hours after first reservation.
package idempotency
