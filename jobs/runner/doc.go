// Package runner executes managed run phases: it takes a phase attempt's
// capacity lease, creates a fresh sandbox, installs the checksum-verified
// OpenTofu, runs init, plan and show (or apply from the saved plan) with the
// remote backend pointed back at Cairn's own /api/v2 under a short-lived run
// token, streams masked logs, and commits the evidence, the sandbox's real
// profile included. On a worker that cannot isolate sandboxes it ends each
// attempt as sandbox_isolation_unavailable before unsealing anything; an
// attempt that ends before any tofu command started changed nothing, so even
// an apply then errors instead of going to recovery. It also holds the River
// workers for approval expiry and lost-attempt reaping.
package runner
