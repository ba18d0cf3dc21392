package registry

import (
	"fmt"

	"github.com/cairnhq/cairn/api/platform/cursor"
	"github.com/cairnhq/cairn/api/platform/fault"
)

var (
	// ErrInvalid wraps fault.ErrValidation for registry inputs.
	ErrInvalid = fmt.Errorf("registry input: %w", fault.ErrValidation)
	// ErrInvalidCursor is a list cursor this service did not issue for
	// the list and filters; it is also a cursor.ErrInvalid.
	ErrInvalidCursor = fmt.Errorf("%w: %w", ErrInvalid, cursor.ErrInvalid)
	// ErrModuleExists means the organization already has a module at the
	// address.
	ErrModuleExists = fmt.Errorf("module already exists: %w", fault.ErrConflict)
	// ErrVersionExists means the module already has the version string.
	ErrVersionExists = fmt.Errorf("module version already exists: %w", fault.ErrConflict)
	// ErrVersionNotPending means the version already took an archive (a
	// published version is immutable), and the upload is not a repeat of
	// the same bytes.
	ErrVersionNotPending = fmt.Errorf("module version already has its archive: %w", fault.ErrConflict)
	// ErrNotDeprecated means a version must be deprecated first (HCP
	// revokes only deprecated versions).
	ErrNotDeprecated = fmt.Errorf("module version is not deprecated: %w", fault.ErrConflict)
	// ErrRevoked means the change is not allowed on a revoked version
	// (un-revoke it first).
	ErrRevoked = fmt.Errorf("module version is revoked: %w", fault.ErrConflict)
	// ErrNotRevoked means the version is not revoked.
	ErrNotRevoked = fmt.Errorf("module version is not revoked: %w", fault.ErrConflict)
	// ErrNotPublished means the version is pending or errored, which
	// deprecation and revocation do not apply to.
	ErrNotPublished = fmt.Errorf("module version is not published: %w", fault.ErrConflict)
	// ErrStorageUnavailable means there is no sealed artifact store (no
	// master key): archives can be neither stored nor read.
	ErrStorageUnavailable = fmt.Errorf("module archive storage: %w", fault.ErrUnavailable)
)
