package plandiff

import (
	"errors"

	"github.com/cairnhq/cairn/api/planjson"
)

var (
	// ErrMalformedPlan means the input is not plan JSON of the expected
	// shape: invalid JSON, a top level that is not an object, or a resource
	// change without an address or actions.
	ErrMalformedPlan = planjson.ErrMalformed
	// ErrUnsupportedFormat means the plan's format_version has a major
	// version other than 1; its masks may not mean what this package
	// assumes, so it is refused rather than redacted by guesswork.
	ErrUnsupportedFormat = planjson.ErrUnsupportedFormat
	// ErrUnsupportedAction means a resource change carries an action tuple
	// the artifact has no action for (for example OpenTofu's ["forget"]);
	// dropping it silently would hide a change from review.
	ErrUnsupportedAction = errors.New("unsupported resource change actions")
)
