// Package run is the heart of Cairn: configuration versions, runs with
// everything they pin at creation, the status machine from plan through
// policy and approval to apply, decisions bound to the exact review, the
// phase attempts the runner executes under capacity leases, sanitized logs,
// run tokens for the sandboxed CLI, and recovery of an apply whose outcome
// is uncertain. Every transition happens under the run's row lock, and every
// job a transition implies is inserted in the same transaction.
package run
