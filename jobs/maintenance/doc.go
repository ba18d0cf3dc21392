// Package maintenance holds the housekeeping jobs of cairn-worker: periodic
// sweeps that delete records whose lifetime is over, in bounded batches.
package maintenance
