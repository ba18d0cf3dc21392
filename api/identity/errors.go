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
	// ErrRateLimited means too many recent attempts for this account and
	// client address, or from this address; see RateLimitedError for the wait.
	ErrRateLimited = errors.New("too many attempts")
	// ErrBusy means no password hashing memory freed up within the short
	// wait; the client should retry shortly.
	ErrBusy = errors.New("password checks busy")
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
	// ErrInvitationPending means the address already has an open invitation
	// to the organization; cancel it to invite again.
	ErrInvitationPending = errors.New("invitation already pending")
	// ErrInvitationClosed means the invitation was accepted, declined or
	// canceled, or its inviter may no longer grant its role.
	ErrInvitationClosed = errors.New("invitation no longer pending")
	// ErrInvitationExpired means the invitation's time ran out.
	ErrInvitationExpired = errors.New("invitation expired")
	// ErrSSORequired refuses the password sign-in of a non-owner member of
	// an organization that requires SSO.
	ErrSSORequired = errors.New("organization requires SSO sign-in")
	// ErrTooManyInvitations bounds the open invitations of an organization.
	ErrTooManyInvitations = errors.New("too many open invitations")
)
