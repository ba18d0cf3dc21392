// Package launch is product admission: the versioned launch-control
// document (public gate, tenant launches, exact organization-and-workspace
// canaries, run and apply switches, regions, ceilings, releases, routing)
// and tenant-scoped suspensions. Admission is a pure function of the control
// and the subject, and every read fails closed: a missing, malformed or
// unreadable control admits nothing. Changes need the expected version and
// an idempotency key and leave before-and-after evidence.
package launch
