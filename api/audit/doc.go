// Package audit records append-only evidence of every mutation in the
// mutation's own transaction and lists an organization's events newest first.
// Evidence is sanitized on the way in: identifiers, enums and counts pass,
// anything shaped like a secret is refused, and every value is bounded.
package audit
