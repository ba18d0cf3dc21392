package identity

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// Revoked counts what a deactivation ended, for its audit evidence.
type Revoked struct {
	Sessions    int64
	UserTokens  int64
	AgentGrants int64
}

// Deactivate bans a user and, in the caller's transaction, deletes every
// session, user API token and agent OAuth grant they hold (the grant takes
// its codes, access and refresh tokens with it). Each of those is already
// refused for a banned user; deleting them means reactivation revives
// none. Service-account tokens belong to their organization and are not
// touched. Deactivating a deactivated user keeps the first ban's time.
func Deactivate(ctx context.Context, tx *sqlx.Tx, userID, reason string, at time.Time) (Revoked, error) {
	if _, err := tx.ExecContext(ctx, `
		UPDATE users SET banned_at = coalesce(banned_at, $2), banned_reason = $3 WHERE id = $1`,
		userID, at, reason); err != nil {
		return Revoked{}, fmt.Errorf("banning user: %w", err)
	}
	var out Revoked
	for _, d := range []struct {
		stmt  string
		count *int64
	}{
		{`DELETE FROM sessions WHERE user_id = $1`, &out.Sessions},
		{`DELETE FROM user_tokens WHERE user_id = $1`, &out.UserTokens},
		{`DELETE FROM oauth_grants WHERE user_id = $1`, &out.AgentGrants},
	} {
		res, err := tx.ExecContext(ctx, d.stmt, userID)
		if err != nil {
			return Revoked{}, fmt.Errorf("revoking what a deactivated user holds: %w", err)
		}
		if *d.count, err = res.RowsAffected(); err != nil {
			return Revoked{}, fmt.Errorf("revoking what a deactivated user holds: %w", err)
		}
	}
	return out, nil
}

// Reactivate lifts a ban. Nothing Deactivate ended comes back: the person
// signs in again.
func Reactivate(ctx context.Context, tx *sqlx.Tx, userID string) error {
	if _, err := tx.ExecContext(ctx, `UPDATE users SET banned_at = NULL, banned_reason = NULL WHERE id = $1`, userID); err != nil {
		return fmt.Errorf("lifting ban: %w", err)
	}
	return nil
}
