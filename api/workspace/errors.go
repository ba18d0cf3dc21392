package workspace

import (
	"errors"
	"fmt"

	"github.com/cairnhq/cairn/api/platform/fault"
)

var (
	// ErrInvalid wraps fault.ErrValidation for workspace inputs.
	ErrInvalid = fmt.Errorf("workspace input: %w", fault.ErrValidation)
	// ErrInvalidHCL means an hcl variable value does not parse.
	ErrInvalidHCL = errors.New("variable value is not valid HCL")
	// ErrNameTaken means another workspace of the organization has the name.
	ErrNameTaken = errors.New("workspace name taken")
	// ErrProjectNameTaken means another project has the name.
	ErrProjectNameTaken = errors.New("project name taken")
	// ErrProjectNotEmpty means a project still holds workspaces, so it
	// cannot be deleted (as in HCP Terraform).
	ErrProjectNotEmpty = errors.New("project holds workspaces")
	// ErrVariableKeyTaken means the workspace already has a variable of
	// that category and key.
	ErrVariableKeyTaken = errors.New("variable key taken")
	// ErrLocked means the workspace is already locked.
	ErrLocked = errors.New("workspace already locked")
	// ErrNotLocked means an unlock found no lock.
	ErrNotLocked = errors.New("workspace already unlocked")
	// ErrLockedByOther means an unlock came from someone who does not hold
	// the lock; Holder names the holder's kind for the message.
	ErrLockedByOther = errors.New("workspace locked by another holder")
	// ErrLockedByRun means an unlock came for a lock a run holds: it is
	// released when the run ends (or by force-unlock).
	ErrLockedByRun = errors.New("workspace locked by a run")
	// ErrLockedByTeam means an unlock came for a lock a team token holds:
	// only that team's token (or force-unlock) releases it.
	ErrLockedByTeam = errors.New("workspace locked by a team")
	// ErrVariableValueRequired means a replace without value changed
	// sensitivity, which would need the value.
	ErrVariableValueRequired = errors.New("variable value required")
)

var (
	// ErrTagNotFound means a tag ID the organization does not hold.
	ErrTagNotFound = fmt.Errorf("tag not found: %w", fault.ErrNotFound)
	// ErrLockedCannotDelete means a safe delete found the workspace locked.
	ErrLockedCannotDelete = errors.New("workspace is locked: it must be unlocked before it can be safely deleted")
	// ErrManagingResources means a safe delete found resources in the
	// workspace's current state.
	ErrManagingResources = errors.New("workspace is still managing resources")
	// ErrForceDeleteOwnersOnly means a workspace admin who is no owner
	// asked to delete a workspace that manages resources, in an
	// organization that keeps that to owners.
	ErrForceDeleteOwnersOnly = errors.New("only organization owners may delete a workspace that still manages resources; " +
		"destroy its resources and safe-delete it, or have an owner set the organization's allow-force-delete-workspaces")
)
