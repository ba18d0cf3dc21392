package access

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cairnhq/cairn/api/platform/fault"
)

// Permission is one named capability. Roles grant sets of them; service
// account tokens carry an explicit subset of their issuer's.
type Permission string

const (
	PermOrganizationRead Permission = "organization:read"
	PermMemberManage     Permission = "member:manage"
	PermProjectRead      Permission = "project:read"
	PermProjectWrite     Permission = "project:write"
	PermWorkspaceRead    Permission = "workspace:read"
	PermWorkspaceWrite   Permission = "workspace:write"
	PermWorkspaceAdmin   Permission = "workspace:admin"
	PermVariableRead     Permission = "variable:read"
	PermVariableWrite    Permission = "variable:write"
	PermRunRead          Permission = "run:read"
	PermRunCreate        Permission = "run:create"
	PermRunApprove       Permission = "run:approve"
	PermRunCancel        Permission = "run:cancel"
	PermRunRecover       Permission = "run:recover"
	PermStateRead        Permission = "state:read"
	// PermStateReadOutputs reads a state version's outputs (sensitive
	// values absent), never its raw body. state:read implies it.
	PermStateReadOutputs      Permission = "state:read_outputs"
	PermStateWrite            Permission = "state:write"
	PermStateForceUnlock      Permission = "state:force_unlock"
	PermStateRecover          Permission = "state:recover"
	PermArtifactReadSensitive Permission = "artifact:read_sensitive"
	PermPolicyRead            Permission = "policy:read"
	PermPolicyWrite           Permission = "policy:write"
	PermPolicyOverrideSoft    Permission = "policy:override_soft"
	PermVCSInstall            Permission = "vcs:install"
	PermCredentialWrite       Permission = "credential:write"
	PermServiceAccountManage  Permission = "service_account:manage"
	PermAuditRead             Permission = "audit:read"
	// PermTeamManage creates, changes and deletes teams, their members and
	// their workspace and project access.
	PermTeamManage Permission = "team:manage"
	// PermTeamOrganizationAccess sets a team's organization-access flags.
	PermTeamOrganizationAccess Permission = "team:organization_access"
	// PermTeamReadSecret sees secret teams one is not a member of.
	PermTeamReadSecret Permission = "team:read_secret"
	// PermRegistryRead reads the organization's private module registry
	// (and lets the CLIs resolve and download its modules). Every role
	// holds it, member included.
	PermRegistryRead Permission = "registry:read"
	// PermRegistryWrite creates, publishes, deprecates, revokes and
	// deletes registry modules and versions.
	PermRegistryWrite Permission = "registry:write"
	// PermVarsetRead reads the organization's variable sets, their scope
	// and their variables (sensitive values never).
	PermVarsetRead Permission = "varset:read"
	// PermVarsetWrite creates, changes, applies and deletes variable sets
	// and their variables.
	PermVarsetWrite Permission = "varset:write"
)

// implied lists permissions that another one includes: whoever may read a
// state body may read its outputs (HCP: state read ⊃ read-outputs),
// whoever may write variables may read them, whoever may publish
// registry modules may read the registry, and whoever may change variable
// sets may read them.
var implied = map[Permission]Permission{PermStateReadOutputs: PermStateRead, PermVariableRead: PermVariableWrite,
	PermRegistryRead: PermRegistryWrite, PermVarsetRead: PermVarsetWrite}

// Role is a member's standing in an organization.
type Role string

const (
	RoleOwner  Role = "owner"
	RoleAdmin  Role = "admin"
	RoleWriter Role = "writer"
	RoleReader Role = "reader"
	// RoleMember belongs to the organization and reaches only what its
	// teams grant (HCP's default). It is the default for invitations.
	RoleMember Role = "member"
)

var memberPermissions = []Permission{PermOrganizationRead, PermRegistryRead}

var readerPermissions = []Permission{
	PermOrganizationRead, PermProjectRead, PermWorkspaceRead, PermVariableRead, PermRunRead, PermStateRead, PermPolicyRead,
	PermRegistryRead, PermVarsetRead,
}

var writerPermissions = append(slices.Clone(readerPermissions),
	PermProjectWrite, PermWorkspaceWrite, PermVariableWrite,
	PermRunCreate, PermRunApprove, PermRunCancel,
	PermStateWrite, PermPolicyWrite, PermRegistryWrite,
)

var adminPermissions = append(slices.Clone(writerPermissions),
	PermMemberManage, PermWorkspaceAdmin, PermRunRecover, PermStateForceUnlock, PermStateRecover,
	PermArtifactReadSensitive, PermPolicyOverrideSoft, PermVCSInstall, PermCredentialWrite,
	PermServiceAccountManage, PermAuditRead, PermTeamManage, PermTeamOrganizationAccess, PermTeamReadSecret,
	PermVarsetWrite,
)

// rolePermissions is the one table of what each role may do. Owners and
// admins hold the same permissions; only an owner may grant, change or remove
// the owner role itself.
var rolePermissions = map[Role][]Permission{
	RoleOwner:  adminPermissions,
	RoleAdmin:  adminPermissions,
	RoleWriter: writerPermissions,
	RoleReader: readerPermissions,
	RoleMember: memberPermissions,
}

// Roles lists the roles in descending order of authority.
func Roles() []Role { return []Role{RoleOwner, RoleAdmin, RoleWriter, RoleReader, RoleMember} }

// ParseRole accepts one of the role names.
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if _, ok := rolePermissions[r]; !ok {
		return "", fmt.Errorf("%w: unknown role %q", fault.ErrValidation, s)
	}
	return r, nil
}

// PermissionsOf returns the permissions a role grants.
func PermissionsOf(r Role) PermissionSet { return NewPermissionSet(rolePermissions[r]...) }

// AllPermissions lists every permission a role or team can grant, sorted.
func AllPermissions() []Permission {
	all := append(slices.Clone(adminPermissions), PermStateReadOutputs)
	slices.Sort(all)
	return slices.Compact(all)
}

// PermissionSet is an immutable set of permissions.
type PermissionSet struct{ perms []Permission }

// NewPermissionSet returns the set of the given permissions.
func NewPermissionSet(perms ...Permission) PermissionSet {
	s := slices.Clone(perms)
	slices.Sort(s)
	return PermissionSet{perms: slices.Compact(s)}
}

// Has reports whether p is in the set, or a permission that implies it.
func (s PermissionSet) Has(p Permission) bool {
	if _, found := slices.BinarySearch(s.perms, p); found {
		return true
	}
	by, ok := implied[p]
	return ok && s.Has(by)
}

// Union returns the permissions in either set. Every authorization check
// of a listed workspace takes a few unions, so it merges the two sorted
// sets in one pass, and returns a set unchanged when it already holds the
// other (an owner's baseline holds every grant's permissions), instead of
// sorting their concatenation.
func (s PermissionSet) Union(other PermissionSet) PermissionSet {
	switch {
	case holdsAll(s.perms, other.perms):
		return s
	case holdsAll(other.perms, s.perms):
		return other
	}
	merged := make([]Permission, 0, len(s.perms)+len(other.perms))
	i, j := 0, 0
	for i < len(s.perms) && j < len(other.perms) {
		switch a, b := s.perms[i], other.perms[j]; {
		case a < b:
			merged = append(merged, a)
			i++
		case b < a:
			merged = append(merged, b)
			j++
		default:
			merged = append(merged, a)
			i++
			j++
		}
	}
	merged = append(merged, s.perms[i:]...)
	merged = append(merged, other.perms[j:]...)
	return PermissionSet{perms: merged}
}

// holdsAll reports whether the sorted, duplicate-free set holds every
// permission of the sorted, duplicate-free sub, by name alone.
func holdsAll(set, sub []Permission) bool {
	i := 0
	for _, p := range sub {
		for i < len(set) && set[i] < p {
			i++
		}
		if i == len(set) || set[i] != p {
			return false
		}
		i++
	}
	return true
}

// Empty reports whether the set holds no permission.
func (s PermissionSet) Empty() bool { return len(s.perms) == 0 }

// Contains reports whether every permission of other is in s.
func (s PermissionSet) Contains(other PermissionSet) bool {
	for _, p := range other.perms {
		if !s.Has(p) {
			return false
		}
	}
	return true
}

// Intersect returns the permissions in both sets.
func (s PermissionSet) Intersect(other PermissionSet) PermissionSet {
	var both []Permission
	for _, p := range s.perms {
		if other.Has(p) {
			both = append(both, p)
		}
	}
	return PermissionSet{perms: both}
}

// List returns the permissions sorted.
func (s PermissionSet) List() []Permission { return slices.Clone(s.perms) }

// Strings returns the permission names sorted.
func (s PermissionSet) Strings() []string {
	out := make([]string, len(s.perms))
	for i, p := range s.perms {
		out[i] = string(p)
	}
	return out
}

// ParsePermissions accepts a list of known permission names.
func ParsePermissions(names []string) (PermissionSet, error) {
	known := NewPermissionSet(AllPermissions()...)
	perms := make([]Permission, 0, len(names))
	for _, n := range names {
		p := Permission(strings.TrimSpace(n))
		if !known.Has(p) {
			return PermissionSet{}, fmt.Errorf("%w: unknown permission %q", fault.ErrValidation, n)
		}
		perms = append(perms, p)
	}
	return NewPermissionSet(perms...), nil
}
