package sandbox

import "errors"

var (
	// ErrCanceled means the caller's context ended (or the sandbox was
	// destroyed) while a command ran; its process tree was terminated.
	ErrCanceled = errors.New("sandbox command canceled")
	// ErrTimedOut means a command outlived Limits.WallClock; its process tree
	// was terminated.
	ErrTimedOut = errors.New("sandbox command timed out")
	// ErrIsolationUnavailable means namespace isolation is required (the
	// default) but bwrap is missing or does not work on this host; nothing
	// was created or run.
	ErrIsolationUnavailable = errors.New("sandbox isolation unavailable")
	// ErrChecksumMismatch means a mirrored tool does not match its SHA256SUMS
	// entry; nothing usable was left in the tool cache.
	ErrChecksumMismatch = errors.New("tool checksum mismatch")
	// ErrInvalidSpec means a Spec, Command or tool reference failed
	// validation; the message names the field.
	ErrInvalidSpec = errors.New("invalid sandbox spec")
	// ErrUnsafePath means a file the worker was to read or write in a
	// sandbox's work directory is a link, a special file or lies outside
	// it: something a command put there, which the worker does not touch.
	ErrUnsafePath = errors.New("unsafe path in the sandbox")
	// ErrNotEntered means the sandbox's session ended before its
	// supervisor was up (bwrap could not set up the namespaces or mounts,
	// or the supervisor could not start): no command of it ever ran.
	ErrNotEntered = errors.New("sandbox could not be entered")
	// ErrDestroyed means the sandbox was destroyed before or during the call.
	ErrDestroyed = errors.New("sandbox destroyed")
)
