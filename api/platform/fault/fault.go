package fault

import "errors"

// Sentinels shared by every domain. Domain packages wrap them (or define their
// own in errors.go); the HTTP surfaces map them to statuses in one place each.
var (
	// ErrNotFound covers both a missing resource and one the caller may not
	// see: the two must be indistinguishable from outside.
	ErrNotFound = errors.New("not found")
	// ErrUnauthenticated means no valid credential came with the request.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrForbidden means the caller is known but lacks a live membership or
	// the permission the operation needs.
	ErrForbidden = errors.New("forbidden")
	// ErrUnavailable means a binding the operation needs (database, secret,
	// control record) is missing, so the operation fails closed.
	ErrUnavailable = errors.New("required binding unavailable")
	// ErrAdmissionClosed means launch control did not admit the request. It
	// is answered with a retryable, non-disclosing 503.
	ErrAdmissionClosed = errors.New("admission closed")
	// ErrValidation is a malformed or out-of-bounds input.
	ErrValidation = errors.New("validation failed")
	// ErrConflict is a generic state conflict (terminal state, stale version).
	ErrConflict = errors.New("conflict")
)
