// Package worker assembles cairn-worker's River client: the queues, every
// job worker and the periodic jobs. Jobs themselves live in their own
// packages under jobs/ so the API can insert their arguments in the
// transaction of the mutation that implies them.
package worker
