package varset

import (
	"errors"
	"fmt"

	"github.com/cairnhq/cairn/api/platform/fault"
)

var (
	// ErrInvalid wraps fault.ErrValidation for variable-set inputs.
	ErrInvalid = fmt.Errorf("variable set input: %w", fault.ErrValidation)
	// ErrNameTaken means another set of the organization has the name,
	// whatever its case.
	ErrNameTaken = errors.New("variable set name taken")
	// ErrKeyTaken means the set already has a variable of that category
	// and key.
	ErrKeyTaken = errors.New("variable set variable key taken")
	// ErrValueRequired means an update without value changed sensitivity,
	// which would need the value.
	ErrValueRequired = errors.New("variable set variable value required")
	// ErrInvalidCursor is a list cursor this list did not issue.
	ErrInvalidCursor = errors.New("invalid variable set cursor")
)
