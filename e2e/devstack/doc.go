// Package devstack starts what Cairn's commands and tests need on one
// machine: a private PostgreSQL cluster run from the installed server
// binaries (as the postgres user when we are root), and Cairn's own
// processes under one supervisor with prefixed logs. `make run`, `make test`,
// the end-to-end tests and the benchmarks all start their stack through it.
package devstack
