// Package dbtest gives integration tests their own PostgreSQL database: a
// fresh clone of the migrated template database in the throwaway cluster
// that `make test` starts, dropped when the test ends, so tests run in
// parallel without seeing each other's rows.
package dbtest
