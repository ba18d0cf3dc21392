// Package fault holds the few sentinel errors that every domain shares: not
// found, unauthenticated, forbidden, unavailable, admission closed,
// validation and conflict. Keeping them in one small package lets domains
// stay free of HTTP while each surface maps errors to statuses in one table.
package fault
