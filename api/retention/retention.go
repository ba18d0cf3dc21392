package retention

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// Retention of what no longer works: a grant is kept this long after it
// expired or was revoked (the dashboard and audit trail may still name
// it), a registered client that never got a grant only a day.
const (
	grantRetention          = 30 * 24 * time.Hour
	unusedClientRetention   = 24 * time.Hour
	metadataClientRetention = 30 * 24 * time.Hour
)

// OAuthRecords deletes ended grants past retention (their codes and tokens
// go with them) and clients nobody authorized: open registration must not
// grow the table without bound.
func OAuthRecords(ctx context.Context, q sqlx.ExecerContext, now time.Time) (int64, error) {
	return deleteAll(ctx, q, "oauth records", []statement{
		{`DELETE FROM oauth_grants WHERE coalesce(revoked_at, expires_at) < $1`, now.Add(-grantRetention)},
		{`DELETE FROM oauth_clients c WHERE c.kind = 'registered' AND c.created_at < $1
		   AND NOT EXISTS (SELECT 1 FROM oauth_grants g WHERE g.client_id = c.id)`, now.Add(-unusedClientRetention)},
		{`DELETE FROM oauth_clients c WHERE c.kind = 'metadata_document' AND c.refresh_after < $1
		   AND NOT EXISTS (SELECT 1 FROM oauth_grants g WHERE g.client_id = c.id)`, now.Add(-metadataClientRetention)},
	})
}

// SignInFlows deletes federated sign-in flows, their one-time codes and
// SSO test results past their expiry: none of them can be used any more.
func SignInFlows(ctx context.Context, q sqlx.ExecerContext, now time.Time) (int64, error) {
	return deleteAll(ctx, q, "sign-in flows", []statement{
		{`DELETE FROM sign_in_flows WHERE expires_at < $1`, now},
		{`DELETE FROM sign_in_codes WHERE expires_at < $1`, now},
		{`DELETE FROM sso_test_results WHERE expires_at < $1`, now},
	})
}

// statement is one DELETE with the instant its records expire before.
type statement struct {
	query  string
	before time.Time
}

func deleteAll(ctx context.Context, q sqlx.ExecerContext, what string, stmts []statement) (int64, error) {
	var total int64
	for _, s := range stmts {
		res, err := q.ExecContext(ctx, s.query, s.before)
		if err != nil {
			return total, fmt.Errorf("sweeping %s: %w", what, err)
		}
		n, _ := res.RowsAffected()
		total += n
	}
	return total, nil
}
