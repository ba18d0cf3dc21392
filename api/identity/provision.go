package identity

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
)

// ProvisionMember creates an account without a password and makes it a
// member of the organization with role and how it arrived, in the caller's
// transaction. An address that already has an account is ErrEmailTaken:
// provisioning never links to an account someone else holds. Without a
// password hash the account cannot sign in with a password (the hash never
// verifies) until one is set.
func ProvisionMember(ctx context.Context, tx *sqlx.Tx, organizationID, email, name string, role access.Role, via JoinedVia, at time.Time) (User, error) {
	email, err := NormalizeEmail(email)
	if err != nil {
		return User{}, err
	}
	if name, err = ValidateName(name); err != nil {
		return User{}, err
	}
	u := User{ID: id.New("usr"), Email: email, Name: name, CreatedAt: at}
	if err := insertUser(ctx, tx, u, ""); err != nil {
		return User{}, err
	}
	if err := insertMembership(ctx, tx, organizationID, u.ID, role, "", via); err != nil {
		return User{}, err
	}
	return u, nil
}

// UpdateProfile changes a user's e-mail and name in the caller's
// transaction; an address another account holds is ErrEmailTaken.
func UpdateProfile(ctx context.Context, tx *sqlx.Tx, userID, email, name string) error {
	email, err := NormalizeEmail(email)
	if err != nil {
		return err
	}
	if name, err = ValidateName(name); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE users SET email = $2, name = $3 WHERE id = $1`, userID, email, name)
	if db.IsUniqueViolation(err, "users_email_key") {
		return ErrEmailTaken
	}
	if err != nil {
		return fmt.Errorf("updating user: %w", err)
	}
	return nil
}

// EndProvisionedMembership removes a provisioned member from the
// organization in the caller's transaction, under the same guards as
// removing anyone: never the last owner, never the owners team's last
// member.
func EndProvisionedMembership(ctx context.Context, tx *sqlx.Tx, organizationID, userID string) error {
	owners, err := lockOwners(ctx, tx, organizationID)
	if err != nil {
		return err
	}
	role, err := membershipRole(ctx, tx, organizationID, userID)
	if errors.Is(err, fault.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if role == access.RoleOwner && len(owners) <= 1 {
		return ErrLastOwner
	}
	if last, err := lastOwnersTeamMember(ctx, tx, organizationID, userID); err != nil || last {
		return cmp.Or(err, ErrLastOwner)
	}
	return deleteMembership(ctx, tx, organizationID, userID)
}
