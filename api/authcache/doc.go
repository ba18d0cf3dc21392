// Package authcache keeps, in one API process, the principal each recently
// presented credential resolved to, so that a request does not read its
// session or token, its person's membership and their team grants again.
//
// A kept principal is served only while nothing it was read from may have
// changed:
//   - every change to those tables notifies cairn_principals when it
//     commits (migration 00059), from any process, and every cache then
//     forgets everything;
//   - nothing is kept or served unless the cache's listener is connected
//     and listening, and every (re)connection and disconnection forgets
//     everything, since notifications may have been missed;
//   - nothing is served unless a notification the cache sent itself
//     through the API's pool came back within the last three seconds (a
//     cache in use sends one a second, an idle one none): a
//     transaction-pooling proxy that loses notifications leaves it off,
//     and a listener whose connection died unnoticed turns it off within
//     that time;
//   - a write this process finished (db.CommittedWrites) makes every
//     principal kept before it miss, so a request sees the revocation a
//     request before it made on the same process without waiting for the
//     notification;
//   - a principal is kept at most until its credential expires, and never
//     longer than MaxAge, counted on the monotonic clock.
//
// Another API process learns of a change when its notification arrives,
// normally within a millisecond of the commit.
package authcache
