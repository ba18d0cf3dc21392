// Package github is Cairn's code-host app: its configuration, the
// installation flow that binds an installation to an organization, the
// signed webhook receiver, workspace source settings, and the ingestion
// that turns a push or pull request into a sealed configuration version
// and a run.
//
// Every delivery is verified over its raw bytes before it is parsed, and
// its provider delivery ID is its global replay identity, kept in a
// tenant-free record with the payload's digest but never the payload.
// Acceptance is one short transaction; provider reads and archive
// transfers happen afterwards in the source-ingestion job, through a
// fresh installation token that is never stored.
//
// A pull request from a fork is code nobody trusted has looked at: unless
// its workspace plans forks (throttled per repository), its ingestion is
// held before anything is downloaded, and only a person planning its exact
// head commit sends it on to a run.
package github
