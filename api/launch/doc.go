// Package launch is product admission: the versioned launch-control
// document (public gate, exact organization-and-workspace canaries, run and
// apply switches, federation providers, regions, ceilings, releases,
// routing), tenant-scoped suspensions and regional capacity leases.
// Admission is a pure function of the control and the subject, and every
// read fails closed: a missing, malformed or unreadable control admits
// nothing, and while the public gate is closed nothing wider than an exact
// canary pair passes. Control and suspension changes need the expected
// version and an idempotency key and leave before-and-after evidence.
package launch
