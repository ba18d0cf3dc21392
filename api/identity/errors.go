package identity

import (
	"errors"
	"fmt"

	"github.com/cairnhq/cairn/api/platform/fault"
)

var (
	// ErrInvalidInput wraps fault.ErrValidation for identity inputs.
	ErrInvalidInput = fmt.Errorf("identity input: %w", fault.ErrValidation)
	// ErrInvalidCredentials is the one answer to a failed sign-in, whether
	// the e-mail exists or not.
	ErrInvalidCredentials = errors.New("invalid credentials")
	// ErrRateLimited means too many recent failures for this e-mail or client.
	ErrRateLimited = errors.New("too many attempts")
	// ErrEmailTaken means sign-up used an e-mail that already has an account.
	ErrEmailTaken = errors.New("email already registered")
	// ErrSlugTaken means an organization slug is in use.
	ErrSlugTaken = errors.New("organization slug taken")
	// ErrNoActiveOrganization means the session has not chosen an organization.
	ErrNoActiveOrganization = fmt.Errorf("no active organization: %w", fault.ErrForbidden)
	// ErrLastOwner protects an organization from losing its final owner.
	ErrLastOwner = errors.New("organization needs at least one owner")
	// ErrMemberExists means the user is already a member.
	ErrMemberExists = errors.New("already a member")
)
