package state

import (
	"errors"
	"fmt"

	"github.com/cairnhq/cairn/api/platform/fault"
)

var (
	// ErrInvalid wraps fault.ErrValidation for state inputs.
	ErrInvalid = fmt.Errorf("state version input: %w", fault.ErrValidation)
	// ErrConflict means a version does not follow the current one (serial,
	// lineage) or is no longer pending.
	ErrConflict = errors.New("state version conflict")
	// ErrNotLockedByWriter means the workspace is not locked by the
	// principal writing state.
	ErrNotLockedByWriter = errors.New("workspace not locked by the state writer")
	// ErrChecksumMismatch means the uploaded bytes do not match the declared
	// MD5; nothing was kept.
	ErrChecksumMismatch = errors.New("state bytes do not match the declared md5")
	// ErrTooLarge means a state crossed MaxStateBytes; nothing was kept.
	ErrTooLarge = errors.New("state over its size limit")
	// ErrWriterRevoked means the run that created a pending version can no
	// longer write state (its run token was revoked, as a cancel does):
	// the upload URL it was given does not outlive that.
	ErrWriterRevoked = errors.New("state writer revoked")
)
