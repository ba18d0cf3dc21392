// Package worker assembles cairn-worker: the sandbox driver (whose isolation
// the worker reports at start and on its /health endpoint), the sweep of
// sandboxes dead workers left, and the River client with its queues, every
// job worker and the periodic jobs. Jobs themselves live in their own
// packages under jobs/ so the API can insert their arguments in the
// transaction of the mutation that implies them. The sandbox sweep is a
// ticker in each worker, not a River periodic job: it must run on every host
// and data directory, and a periodic job runs on one elected worker.
package worker
