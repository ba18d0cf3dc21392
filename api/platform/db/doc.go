// Package db opens Cairn's PostgreSQL connection, runs explicit transactions
// (WithTx), applies the embedded migrations and reports whether the schema is
// current. Store functions elsewhere take sqlx.ExtContext so the same query
// serves inside or outside a transaction.
package db
