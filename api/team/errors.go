package team

import (
	"errors"
	"fmt"

	"github.com/cairnhq/cairn/api/platform/fault"
)

var (
	// ErrInvalid wraps fault.ErrValidation for team inputs.
	ErrInvalid = fmt.Errorf("team input: %w", fault.ErrValidation)
	// ErrNameTaken means another team of the organization has the name.
	ErrNameTaken = errors.New("team name taken")
	// ErrSSOTeamIDTaken means another team has the SSO team ID.
	ErrSSOTeamIDTaken = errors.New("sso team id taken")
	// ErrGrantExists means the team already has access to the workspace or
	// project.
	ErrGrantExists = errors.New("team access already granted")
	// ErrOwnersTeam means the change is not allowed on the built-in owners
	// team: it cannot be deleted, renamed or given other organization
	// access.
	ErrOwnersTeam = errors.New("the owners team cannot be changed that way")
	// ErrOwnersTeamEmpty means the change would leave the owners team
	// without a member.
	ErrOwnersTeamEmpty = errors.New("the owners team keeps at least one member")
	// ErrNotOwner means only an owner may change the owners team's members.
	ErrNotOwner = fmt.Errorf("only an owner changes the owners team: %w", fault.ErrForbidden)
)

// ReadOnlyAttributeError is an attribute set with a fixed access level: it
// is settable only with access "custom" (HCP's wording, which go-tfe
// clients match).
type ReadOnlyAttributeError struct {
	Attribute, Level string
}

func (e ReadOnlyAttributeError) Error() string {
	return fmt.Sprintf("%s is read-only when access level is '%s'; use the 'custom' access level to set this attribute.", e.Attribute, e.Level)
}

// Unwrap makes it a validation failure.
func (e ReadOnlyAttributeError) Unwrap() error { return fault.ErrValidation }
