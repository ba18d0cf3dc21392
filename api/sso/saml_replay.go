package sso

import (
	"context"
	"fmt"
	"time"

	"github.com/crewjam/saml"
	"github.com/jmoiron/sqlx"
)

// assertionLedger is the SAML replay cache of one provider: the IDs of the
// assertions it has had accepted, in PostgreSQL so that every API replica
// refuses a response another one already accepted. crewjam/saml calls
// Consume once an assertion has passed every other check; it has no
// context, so the ledger carries the request's.
type assertionLedger struct {
	ctx        context.Context
	q          sqlx.ExtContext
	providerID string
	now        func() time.Time
}

var _ saml.AssertionReplayCache = (*assertionLedger)(nil)

// Consume records assertionID until expiresAt. The insert and the purge of
// the provider's expired IDs are one statement; a row that already exists
// (even one that expires in the same statement's purge, which runs on the
// same snapshot) means the assertion was seen before.
func (l *assertionLedger) Consume(assertionID string, expiresAt time.Time) error {
	res, err := l.q.ExecContext(l.ctx, `
		WITH purged AS (
			DELETE FROM saml_assertion_ids WHERE provider_id = $1 AND expires_at < $4
		)
		INSERT INTO saml_assertion_ids (provider_id, assertion_id, expires_at) VALUES ($1, $2, $3)
		ON CONFLICT (provider_id, assertion_id) DO NOTHING`,
		l.providerID, assertionID, expiresAt, l.now())
	if err != nil {
		return fmt.Errorf("recording assertion ID: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("recording assertion ID: %w", err)
	} else if n == 0 {
		return saml.ErrAssertionReplayed
	}
	return nil
}
