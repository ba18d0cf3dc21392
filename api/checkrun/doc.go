// Package checkrun publishes one code-host check run per managed run of a
// tracked or pull-request source (SPEC §6 "Outbound effects").
//
// The run's transaction decides what the check should say: every write of a
// tracked run passes through Service.RunSaved, which derives the check
// payload from the run, and when it differs from the last one stored marks
// the publication pending and inserts a sync job in that same transaction.
// Nothing talks to the code host inside a run transaction: a cancel or a
// rejection commits first, and a provider that is down only delays the
// check.
//
// The sync (Service.Sync, from SyncWorker and the periodic ReconcileWorker)
// takes a short lease on the publication, writes to the provider outside
// any transaction, and records the outcome only under the lease it holds.
// A create whose answer was lost is found again by listing the commit's
// check runs of this app and matching external_id, the run ID; an
// identical payload is never sent twice.
//
// A source ingestion held before any run exists (a pull request from a
// fork) has a publication of its own (TrackHeld): a neutral check whose
// external_id is the ingestion's ID, linking to the page where a person can
// plan the commit. It goes through the same reservation, lease, search and
// reconciler; the run the ingestion may become later gets its own check.
package checkrun
