package launch

import (
	"errors"
	"fmt"

	"github.com/cairnhq/cairn/api/platform/fault"
)

var (
	// ErrMalformed means a control document failed validation; a stored
	// malformed control admits nothing.
	ErrMalformed = fmt.Errorf("launch control malformed: %w", fault.ErrValidation)
	// ErrVersionConflict means the expected version is not the current one.
	ErrVersionConflict = errors.New("launch control version conflict")
	// ErrKeyReused means an idempotency key was reused for another change.
	ErrKeyReused = errors.New("launch control idempotency key reused")
	// ErrSuspensionVersionConflict means the expected suspension version
	// of the subject is not the current one.
	ErrSuspensionVersionConflict = errors.New("suspension version conflict")
	// ErrSuspensionUnchanged means the subject is already in the asked
	// state: suspending a suspended subject, or lifting an unsuspended one.
	ErrSuspensionUnchanged = errors.New("suspension already in that state")
)
