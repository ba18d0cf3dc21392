// Package notify fans PostgreSQL notifications out to in-process
// subscribers. One lib/pq listener connection per process listens on one
// channel whose payload names a key (a run ID); each subscriber of that key
// gets a coalescing wake-up and re-reads what changed from the database,
// which stays the source of truth. After the listener reconnects every
// subscriber is woken, since notifications sent meanwhile are lost.
//
// It also announces jobs: AnnouncingInserter sends the insert notification
// River's workers listen for with every job that can start, which River's
// own rate-limited notification does not.
package notify
