package maintenance_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/riverqueue/river"

	"github.com/cairnhq/cairn/api/platform/dbtest"
	"github.com/cairnhq/cairn/jobs/maintenance"
)

func TestIdempotencySweepDeletesOnlyExpiredRecords(t *testing.T) {
	t.Parallel()
	conn := dbtest.New(t)
	if _, err := conn.Exec(`INSERT INTO organizations (id, name, slug) VALUES ('org_x', 'X', 'x')`); err != nil {
		t.Fatal(err)
	}
	// 2,500 expired records (more than one sweep batch) and one live one.
	if _, err := conn.Exec(`
		INSERT INTO idempotency_records (organization_id, principal_id, idempotency_key, fingerprint, method, route,
			response_status, response_sealed, created_at, expires_at)
		SELECT 'org_x', 'usr_x', 'k' || g, '\x00'::bytea, 'POST', '/v1/projects', 201, '{}'::bytea, now() - interval '25 hours', now() - interval '1 hour'
		FROM generate_series(1, 2500) g
		UNION ALL
		SELECT 'org_x', 'usr_x', 'live', '\x00'::bytea, 'POST', '/v1/projects', 201, '{}'::bytea, now(), now() + interval '23 hours'`); err != nil {
		t.Fatal(err)
	}
	w := &maintenance.IdempotencySweepWorker{DB: conn, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := w.Work(context.Background(), &river.Job[maintenance.IdempotencySweepArgs]{}); err != nil {
		t.Fatal(err)
	}
	var keys []string
	if err := conn.Select(&keys, `SELECT idempotency_key FROM idempotency_records`); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0] != "live" {
		t.Fatalf("after sweep: %d records (%v...)", len(keys), keys[:min(3, len(keys))])
	}
}

func TestSignInSweepDeletesOnlyStaleThrottlesAndInvitations(t *testing.T) {
	t.Parallel()
	conn := dbtest.New(t)
	if _, err := conn.Exec(`
		INSERT INTO organizations (id, name, slug) VALUES ('org_x', 'X', 'x');
		INSERT INTO users (id, email, name, password_hash) VALUES ('usr_x', 'x@example.com', 'X', 'h');
		INSERT INTO sign_in_throttles (subject, level, updated_at) VALUES
			('pair:old', 3, now() - interval '25 hours'), ('pair:recent', 3, now() - interval '1 hour');
		INSERT INTO invitations (id, organization_id, email, role, token_hash, inviter_id, status, created_at, expires_at, closed_at) VALUES
			('inv_closed_long_ago', 'org_x', 'a@example.com', 'reader', '\x00', 'usr_x', 'accepted', now() - interval '40 days', now() - interval '33 days', now() - interval '39 days'),
			('inv_expired_long_ago', 'org_x', 'b@example.com', 'reader', '\x00', 'usr_x', 'pending', now() - interval '40 days', now() - interval '33 days', NULL),
			('inv_closed_recently', 'org_x', 'c@example.com', 'reader', '\x00', 'usr_x', 'canceled', now() - interval '2 days', now() + interval '5 days', now() - interval '1 day'),
			('inv_open', 'org_x', 'd@example.com', 'reader', '\x00', 'usr_x', 'pending', now(), now() + interval '7 days', NULL)`); err != nil {
		t.Fatal(err)
	}
	w := &maintenance.SignInFailureSweepWorker{DB: conn}
	if err := w.Work(context.Background(), &river.Job[maintenance.SignInFailureSweepArgs]{}); err != nil {
		t.Fatal(err)
	}
	var left []string
	if err := conn.Select(&left, `SELECT subject FROM sign_in_throttles UNION ALL SELECT id FROM invitations ORDER BY 1`); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(left) != "[inv_closed_recently inv_open pair:recent]" {
		t.Fatalf("after sweep: %v", left)
	}
}

// TestSignInSweepDeletesEndedGrantsAndUnusedClients: open registration
// cannot grow the client table without bound, and grants that ended long
// ago go (with their tokens); live ones and their clients stay, and so
// does the built-in client of `tofu login`.
func TestSignInSweepDeletesEndedGrantsAndUnusedClients(t *testing.T) {
	t.Parallel()
	conn := dbtest.New(t)
	if _, err := conn.Exec(`
		INSERT INTO organizations (id, name, slug) VALUES ('org_x', 'X', 'x');
		INSERT INTO users (id, email, name, password_hash) VALUES ('usr_x', 'x@example.com', 'X', 'h');
		INSERT INTO oauth_clients (id, kind, name, redirect_uris, grant_types, scopes, token_endpoint_auth_method, created_at) VALUES
			('ocl_unused_old', 'registered', 'a', '{https://a.example/cb}', '{authorization_code}', '{mcp:tools}', 'none', now() - interval '2 days'),
			('ocl_unused_new', 'registered', 'b', '{https://a.example/cb}', '{authorization_code}', '{mcp:tools}', 'none', now()),
			('ocl_used', 'registered', 'c', '{https://a.example/cb}', '{authorization_code}', '{mcp:tools}', 'none', now() - interval '90 days');
		INSERT INTO oauth_grants (id, client_id, organization_id, user_id, scopes, resource, expires_at, revoked_at, revoked_reason) VALUES
			('ogr_revoked_long_ago', 'ocl_used', 'org_x', 'usr_x', '{mcp:tools}', 'https://m.example/mcp', now() + interval '1 day', now() - interval '31 days', 'revoked'),
			('ogr_expired_long_ago', 'ocl_used', 'org_x', 'usr_x', '{mcp:tools}', 'https://m.example/mcp', now() - interval '31 days', NULL, NULL),
			('ogr_live', 'ocl_used', 'org_x', 'usr_x', '{mcp:tools}', 'https://m.example/mcp', now() + interval '1 day', NULL, NULL);
		INSERT INTO oauth_access_tokens (id, token_hash, grant_id, scopes, expires_at) VALUES
			('oat_gone', '\x01', 'ogr_expired_long_ago', '{mcp:tools}', now() - interval '31 days')`); err != nil {
		t.Fatal(err)
	}
	w := &maintenance.SignInFailureSweepWorker{DB: conn}
	if err := w.Work(context.Background(), &river.Job[maintenance.SignInFailureSweepArgs]{}); err != nil {
		t.Fatal(err)
	}
	var grants, clients []string
	if err := conn.Select(&grants, `SELECT id FROM oauth_grants ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if err := conn.Select(&clients, `SELECT id FROM oauth_clients ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	var tokens int
	_ = conn.Get(&tokens, `SELECT count(*) FROM oauth_access_tokens`)
	if fmt.Sprint(grants) != "[ogr_live]" || fmt.Sprint(clients) != "[ocl_unused_new ocl_used terraform-cli]" || tokens != 0 {
		t.Fatalf("after sweep: grants %v, clients %v, tokens %d", grants, clients, tokens)
	}
}

// TestSignInSweepDeletesExpiredFederatedFlows: sign-in flows and one-time
// codes past their expiry go; live ones stay.
func TestSignInSweepDeletesExpiredFederatedFlows(t *testing.T) {
	t.Parallel()
	conn := dbtest.New(t)
	if _, err := conn.Exec(`
		INSERT INTO users (id, email, name, password_hash) VALUES ('usr_x', 'x@example.com', 'X', 'h');
		INSERT INTO sessions (id, token_hash, user_id, expires_at) VALUES ('ses_x', '\x01', 'usr_x', now() + interval '1 day');
		INSERT INTO sign_in_flows (state_hash, kind, provider, nonce, callback_url, binding_hash, expires_at) VALUES
			('\x01', 'social', 'oidc', 'n', 'https://d.example/', decode(repeat('00', 32), 'hex'), now() - interval '1 minute'),
			('\x02', 'social', 'oidc', 'n', 'https://d.example/', decode(repeat('00', 32), 'hex'), now() + interval '9 minutes');
		INSERT INTO sign_in_codes (code_hash, user_id, session_id, binding_hash, expires_at) VALUES
			('\x01', 'usr_x', 'ses_x', decode(repeat('00', 32), 'hex'), now() - interval '1 minute'),
			('\x02', 'usr_x', 'ses_x', decode(repeat('00', 32), 'hex'), now() + interval '4 minutes')`); err != nil {
		t.Fatal(err)
	}
	w := &maintenance.SignInFailureSweepWorker{DB: conn}
	if err := w.Work(context.Background(), &river.Job[maintenance.SignInFailureSweepArgs]{}); err != nil {
		t.Fatal(err)
	}
	var flows, codes int
	_ = conn.Get(&flows, `SELECT count(*) FROM sign_in_flows`)
	_ = conn.Get(&codes, `SELECT count(*) FROM sign_in_codes`)
	if flows != 1 || codes != 1 {
		t.Fatalf("after sweep: %d flows, %d codes", flows, codes)
	}
}
