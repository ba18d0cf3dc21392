package scim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/scim2/filter-parser/v2"

	elimity "github.com/elimity-com/scim"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/identity"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/secret"
	"github.com/cairnhq/cairn/api/team"
)

// TokenPrefix starts every SCIM token.
const TokenPrefix = "cscim_"

// Options configure the SCIM service.
type Options struct {
	// TokenKey keys the stored hash of SCIM tokens (from AUTH_SECRET).
	TokenKey []byte
	// BaseURL is the SCIM base, {public URL}/api/auth/scim/v2, for the
	// resources' meta.location.
	BaseURL string
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Service is SCIM provisioning for every organization.
type Service struct {
	db     *sqlx.DB
	teams  *team.Service
	logger *slog.Logger
	opts   Options
	now    func() time.Time
}

// NewService returns the SCIM service. Teams are changed through the team
// service, as SCIM's principal, so their rules and audit events are the
// same as anyone's.
func NewService(conn *sqlx.DB, teams *team.Service, logger *slog.Logger, opts Options) *Service {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Service{db: conn, teams: teams, logger: logger, opts: opts, now: now}
}

func (s *Service) stamp() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

func (s *Service) tokenHash(plaintext string) []byte {
	return secret.TokenHash(s.opts.TokenKey, "scim-token", plaintext)
}

// requireOwner admits an owner of the organization, signed in as
// themselves: the token provisions and deactivates its people.
func requireOwner(p access.Principal) error {
	if p.Kind != access.KindUser || p.IsAgent() || p.Role != access.RoleOwner {
		return ErrNotOwner
	}
	return nil
}

// GenerateToken issues the organization's SCIM token, replacing any
// previous one at once. The plaintext is returned once; only its hash is
// kept.
func (s *Service) GenerateToken(ctx context.Context, p access.Principal) (string, error) {
	if err := requireOwner(p); err != nil {
		return "", err
	}
	plaintext, err := secret.NewToken(TokenPrefix)
	if err != nil {
		return "", err
	}
	err = db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		before, err := tokenStatus(ctx, tx, p.OrganizationID)
		if err != nil {
			return err
		}
		if err := replaceToken(ctx, tx, p.OrganizationID, s.tokenHash(plaintext), p.ID, s.stamp()); err != nil {
			return err
		}
		return audit.Record(ctx, tx, p, "scim.token_generated", "organization", p.OrganizationID,
			map[string]any{"replaced": before.Exists})
	})
	if err != nil {
		return "", err
	}
	return plaintext, nil
}

// TokenStatus tells an owner whether a SCIM token exists and when it was
// created and last used.
func (s *Service) TokenStatus(ctx context.Context, p access.Principal) (TokenStatus, error) {
	if err := requireOwner(p); err != nil {
		return TokenStatus{}, err
	}
	return tokenStatus(ctx, s.db, p.OrganizationID)
}

// Authenticate resolves a SCIM bearer token to its organization; anything
// else is ErrInvalidToken.
func (s *Service) Authenticate(ctx context.Context, plaintext string) (string, error) {
	if len(plaintext) <= len(TokenPrefix) || len(plaintext) > 128 || plaintext[:len(TokenPrefix)] != TokenPrefix {
		return "", ErrInvalidToken
	}
	return organizationOfToken(ctx, s.db, s.tokenHash(plaintext), s.stamp())
}

// CreateUser provisions a person: a new account without a password, a
// member of the organization with role member, owned by this SCIM client.
// An e-mail that already has an account, or a userName in use, is
// ErrUniqueness: SCIM never takes over an existing account.
func (s *Service) CreateUser(ctx context.Context, organizationID string, res map[string]any) (User, error) {
	u, err := userFromResource(res, true)
	if err != nil {
		return User{}, err
	}
	email, err := u.email()
	if err != nil {
		return User{}, err
	}
	p := access.SCIM(organizationID)
	u.OrganizationID, u.CreatedAt, u.UpdatedAt = organizationID, s.stamp(), s.stamp()
	err = db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		account, err := identity.ProvisionMember(ctx, tx, organizationID, email, u.accountName(), access.RoleMember,
			identity.JoinedBySCIM, u.CreatedAt)
		if errors.Is(err, identity.ErrEmailTaken) {
			return fmt.Errorf("e-mail %s: %w", email, ErrUniqueness)
		}
		if err != nil {
			return err
		}
		u.ID = account.ID
		if err := insertUser(ctx, tx, u); err != nil {
			return err
		}
		if err := audit.Record(ctx, tx, p, "scim.user_provisioned", "user", u.ID,
			map[string]any{"user_name": u.UserName, "active": u.Active}); err != nil {
			return err
		}
		if !u.Active {
			return s.deactivate(ctx, tx, p, u.ID)
		}
		return nil
	})
	if err != nil {
		return User{}, err
	}
	return u, nil
}

// GetUser reads a person this organization's SCIM provisioned.
func (s *Service) GetUser(ctx context.Context, organizationID, userID string) (User, error) {
	return userByID(ctx, s.db, organizationID, userID, false)
}

// ListUsers reads one page of the organization's provisioned people
// matching a filter (nil: all), from startIndex (1-based), and how many
// match.
func (s *Service) ListUsers(ctx context.Context, organizationID string, f filter.Expression, startIndex, count int) ([]User, int, error) {
	compiled, err := compileOptional(f, userColumns)
	if err != nil {
		return nil, 0, err
	}
	return listUsers(ctx, s.db, organizationID, compiled, max(startIndex, 1)-1, count)
}

func compileOptional(f filter.Expression, cols columns) (sqlFilter, error) {
	if f == nil {
		return sqlFilter{}, nil
	}
	return compileFilter(f, cols, 2)
}

// ReplaceUser sets every attribute of a provisioned person (PUT).
func (s *Service) ReplaceUser(ctx context.Context, organizationID, userID string, res map[string]any) (User, error) {
	return s.changeUser(ctx, organizationID, userID, func(User) (map[string]any, error) { return res, nil })
}

// PatchUser applies PATCH operations to a provisioned person.
func (s *Service) PatchUser(ctx context.Context, organizationID, userID string, ops []elimity.PatchOperation) (User, error) {
	return s.changeUser(ctx, organizationID, userID, func(current User) (map[string]any, error) {
		res := current.resource()
		return res, applyPatch(res, ops)
	})
}

// changeUser writes what next makes of a provisioned person under its row
// lock: the SCIM attributes, the account's e-mail and name, and the
// active state. Deactivation bans the account and ends everything it
// holds in the same transaction; reactivation lifts the ban and revives
// nothing.
func (s *Service) changeUser(ctx context.Context, organizationID, userID string, next func(User) (map[string]any, error)) (User, error) {
	p := access.SCIM(organizationID)
	var out User
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		current, err := userByID(ctx, tx, organizationID, userID, true)
		if err != nil {
			return err
		}
		res, err := next(current)
		if err != nil {
			return err
		}
		u, err := userFromResource(res, current.Active)
		if err != nil {
			return err
		}
		email, err := u.email()
		if err != nil {
			return err
		}
		u.ID, u.OrganizationID, u.CreatedAt, u.UpdatedAt = current.ID, organizationID, current.CreatedAt, s.stamp()
		if err := identity.UpdateProfile(ctx, tx, u.ID, email, u.accountName()); errors.Is(err, identity.ErrEmailTaken) {
			return fmt.Errorf("e-mail %s: %w", email, ErrUniqueness)
		} else if err != nil {
			return err
		}
		if err := updateUser(ctx, tx, u); err != nil {
			return err
		}
		if err := audit.Record(ctx, tx, p, "scim.user_updated", "user", u.ID, map[string]any{"user_name": u.UserName}); err != nil {
			return err
		}
		switch {
		case current.Active && !u.Active:
			err = s.deactivate(ctx, tx, p, u.ID)
		case !current.Active && u.Active:
			if err = identity.Reactivate(ctx, tx, u.ID); err == nil {
				err = audit.Record(ctx, tx, p, "scim.user_reactivated", "user", u.ID, nil)
			}
		}
		out = u
		return err
	})
	return out, err
}

func (s *Service) deactivate(ctx context.Context, tx *sqlx.Tx, p access.Principal, userID string) error {
	revoked, err := identity.Deactivate(ctx, tx, userID, DeactivatedReason, s.stamp())
	if err != nil {
		return err
	}
	return audit.Record(ctx, tx, p, "scim.user_deactivated", "user", userID, map[string]any{
		"ended_sessions": revoked.Sessions, "revoked_user_api_credentials": revoked.UserTokens, "revoked_agent_grants": revoked.AgentGrants})
}

// DeleteUser ends a provisioned person's membership and deactivates the
// account as active=false does; the resource is gone for SCIM, and the
// record of who owned the account stays.
func (s *Service) DeleteUser(ctx context.Context, organizationID, userID string) error {
	p := access.SCIM(organizationID)
	return db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		u, err := userByID(ctx, tx, organizationID, userID, true)
		if err != nil {
			return err
		}
		if err := identity.EndProvisionedMembership(ctx, tx, organizationID, userID); err != nil {
			return err
		}
		if err := markUserDeleted(ctx, tx, organizationID, userID, s.stamp()); err != nil {
			return err
		}
		if err := audit.Record(ctx, tx, p, "scim.user_deleted", "user", userID, map[string]any{"user_name": u.UserName}); err != nil {
			return err
		}
		return s.deactivate(ctx, tx, p, userID)
	})
}

// CreateGroup creates a team.
func (s *Service) CreateGroup(ctx context.Context, organizationID string, res map[string]any) (Group, error) {
	in, err := groupFromResource(res)
	if err != nil {
		return Group{}, err
	}
	p := access.SCIM(organizationID)
	var out Group
	err = db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		t, err := s.teams.Create(ctx, tx, p, team.CreateInput{Name: in.DisplayName})
		if err != nil {
			return err
		}
		if err := s.writeGroup(ctx, tx, p, Group{ID: t.ID, DisplayName: t.Name}, in); err != nil {
			return err
		}
		out, err = groupByID(ctx, tx, organizationID, t.ID, false)
		return err
	})
	return out, err
}

// GetGroup reads a team; the owners team is not found.
func (s *Service) GetGroup(ctx context.Context, organizationID, teamID string) (Group, error) {
	return groupByID(ctx, s.db, organizationID, teamID, false)
}

// ListGroups reads one page of the organization's teams (the owners team
// never among them) matching a filter (nil: all), with their provisioned
// members unless members is false.
func (s *Service) ListGroups(ctx context.Context, organizationID string, f filter.Expression, startIndex, count int, members bool) ([]Group, int, error) {
	compiled, err := compileOptional(f, groupColumns)
	if err != nil {
		return nil, 0, err
	}
	return listGroups(ctx, s.db, organizationID, compiled, max(startIndex, 1)-1, count, members)
}

// ReplaceGroup sets a team's name, externalId and provisioned members.
func (s *Service) ReplaceGroup(ctx context.Context, organizationID, teamID string, res map[string]any) (Group, error) {
	return s.changeGroup(ctx, organizationID, teamID, func(Group) (map[string]any, error) { return res, nil })
}

// PatchGroup applies PATCH operations to a team.
func (s *Service) PatchGroup(ctx context.Context, organizationID, teamID string, ops []elimity.PatchOperation) (Group, error) {
	return s.changeGroup(ctx, organizationID, teamID, func(current Group) (map[string]any, error) {
		res := current.resource()
		return res, applyPatch(res, ops)
	})
}

func (s *Service) changeGroup(ctx context.Context, organizationID, teamID string, next func(Group) (map[string]any, error)) (Group, error) {
	p := access.SCIM(organizationID)
	var out Group
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		current, err := groupByID(ctx, tx, organizationID, teamID, true)
		if err != nil {
			return err
		}
		res, err := next(current)
		if err != nil {
			return err
		}
		in, err := groupFromResource(res)
		if err != nil {
			return err
		}
		if err := s.writeGroup(ctx, tx, p, current, in); err != nil {
			return err
		}
		out, err = groupByID(ctx, tx, organizationID, teamID, false)
		return err
	})
	return out, err
}

// writeGroup makes a team what in says: its name, its externalId, and its
// provisioned members (people SCIM did not provision keep their team
// memberships; naming one as a member is an invalid value).
func (s *Service) writeGroup(ctx context.Context, tx *sqlx.Tx, p access.Principal, current Group, in groupInput) error {
	if in.DisplayName != current.DisplayName {
		if _, err := s.teams.Update(ctx, tx, p, current.ID, team.UpdateInput{Name: &in.DisplayName}); err != nil {
			return err
		}
	}
	if err := setGroupExternalID(ctx, tx, p.OrganizationID, current.ID, in.ExternalID); err != nil {
		return err
	}
	provisioned, err := provisionedUsers(ctx, tx, p.OrganizationID, in.MemberIDs)
	if err != nil {
		return err
	}
	for _, id := range in.MemberIDs {
		if !provisioned[id] {
			return fmt.Errorf("%w: member %q is not a user this SCIM client provisioned", ErrInvalidValue, id)
		}
	}
	var held, gone []string
	for _, m := range current.Members {
		held = append(held, m.UserID)
		if !slices.Contains(in.MemberIDs, m.UserID) {
			gone = append(gone, m.UserID)
		}
	}
	var added []string
	for _, id := range in.MemberIDs {
		if !slices.Contains(held, id) {
			added = append(added, id)
		}
	}
	if len(added) > 0 {
		if err := s.teams.AddMembers(ctx, tx, p, current.ID, added); err != nil {
			return err
		}
	}
	if len(gone) > 0 {
		return s.teams.RemoveMembers(ctx, tx, p, current.ID, gone)
	}
	return nil
}

// DeleteGroup deletes a team with its grants.
func (s *Service) DeleteGroup(ctx context.Context, organizationID, teamID string) error {
	return db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		if _, err := groupByID(ctx, tx, organizationID, teamID, true); err != nil {
			return err
		}
		_, err := s.teams.Delete(ctx, tx, access.SCIM(organizationID), teamID)
		return err
	})
}
