// Package maintenance holds the housekeeping jobs of cairn-worker: periodic
// sweeps that delete records whose lifetime is over, in bounded batches,
// and the workflow dispatch reconciler that redelivers lost jobs.
package maintenance
