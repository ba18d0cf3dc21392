// Package dispatch keeps the durable record of every workflow a mutation
// implies (SPEC §8 "Workflow dispatch reconciliation"): a row of
// workflow_dispatches written in the mutation's transaction beside the River
// job it inserts, under a deterministic identity ({kind}-{subject ID}). The
// row, not the job, is the source of truth: the reconciler claims a bounded
// batch of due records, lets each kind's handler look at its subject and
// redeliver a job that was lost or exhausted, and backs off between visits.
// A record is completed in the same transaction that settles its subject.
package dispatch
