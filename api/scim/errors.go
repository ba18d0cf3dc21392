package scim

import (
	"errors"
	"fmt"

	"github.com/cairnhq/cairn/api/platform/fault"
)

var (
	// ErrInvalidToken means a SCIM request's bearer token is missing or
	// matches no organization's current token.
	ErrInvalidToken = fmt.Errorf("invalid SCIM token: %w", fault.ErrUnauthenticated)
	// ErrNotOwner means only an owner of the organization manages its SCIM
	// token.
	ErrNotOwner = fmt.Errorf("only an owner manages the SCIM token: %w", fault.ErrForbidden)
	// ErrUniqueness means a userName, e-mail or group name is already in
	// use: SCIM never links to an existing account.
	ErrUniqueness = errors.New("already in use")
	// ErrInvalidValue wraps fault.ErrValidation for SCIM attribute values.
	ErrInvalidValue = fmt.Errorf("invalid SCIM value: %w", fault.ErrValidation)
	// ErrNoTarget means a PATCH path selected nothing it could change.
	ErrNoTarget = fmt.Errorf("patch path has no target: %w", fault.ErrValidation)
	// ErrUnsupportedFilter means a filter names an attribute or operator
	// this server does not filter on.
	ErrUnsupportedFilter = fmt.Errorf("unsupported filter: %w", fault.ErrValidation)
)
