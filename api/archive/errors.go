package archive

import (
	"errors"
	"fmt"
)

// ErrInvalid matches every *Error, so a caller that only needs to refuse the
// upload can use errors.Is without knowing the codes.
var ErrInvalid = errors.New("invalid configuration archive")

// Codes are part of the API contract: clients see them, so they never change.
const (
	codeTooLarge        = "archive_too_large"
	codeMalformed       = "archive_malformed"
	codeChecksumInvalid = "archive_checksum_invalid"
	codePathTraversal   = "archive_path_traversal"
	codeAbsolutePath    = "archive_absolute_path"
	codePathInvalid     = "archive_path_invalid"
	codePathTooLong     = "archive_path_too_long"
	codeDuplicatePath   = "archive_duplicate_path"
	codeLink            = "archive_link"
	codeEntryType       = "archive_entry_type"
	codeExpansion       = "archive_expansion"
	codeTooManyEntries  = "archive_too_many_entries"
	codeEmpty           = "archive_empty"
)

// Error is why an archive was refused. It carries a code rather than the
// underlying cause so the answer to the client is stable and leaks nothing;
// stream failures wrap the cause alongside it for the logs.
type Error struct {
	Code string
	// Path is the offending entry's name as the archive spelled it, "" when
	// the fault is in the stream rather than in one entry.
	Path string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%s: %s", ErrInvalid, e.Code)
	}
	// %q because the name is attacker-chosen and may hold control characters.
	return fmt.Sprintf("%s: %s: entry %q", ErrInvalid, e.Code, e.Path)
}

func (e *Error) Is(target error) bool { return target == ErrInvalid }

// CodeOf returns the code of the *Error in err's chain, "" when there is none
// (a cancelled context or a failing disk is not the archive's fault).
func CodeOf(err error) string {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	return ""
}
