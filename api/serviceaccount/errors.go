package serviceaccount

import (
	"errors"
	"fmt"

	"github.com/cairnhq/cairn/api/platform/fault"
)

var (
	// ErrInvalid wraps fault.ErrValidation for service-account inputs.
	ErrInvalid = fmt.Errorf("service account input: %w", fault.ErrValidation)
	// ErrPermissionsExceedIssuer means a token asked for more than its issuer has.
	ErrPermissionsExceedIssuer = fmt.Errorf("token permissions exceed issuer: %w", fault.ErrForbidden)
	// ErrNameTaken means another service account has the name.
	ErrNameTaken = errors.New("service account name taken")
	// ErrInvalidToken means a presented token is unknown, revoked or expired.
	ErrInvalidToken = errors.New("invalid token")
)
