package run

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
)

// TokenPrefix marks run tokens.
const TokenPrefix = "rat_"

// ErrInvalidToken means a run token is unknown, expired, revoked, or its
// attempt is no longer running.
var ErrInvalidToken = errors.New("invalid run token")

func (s *Service) tokenHash(token string) []byte {
	m := hmac.New(sha256.New, s.opts.TokenKey)
	m.Write([]byte(token))
	return m.Sum(nil)
}

// IssueToken mints the run token of a started attempt: the sandboxed CLI's
// only credential, good for this workspace's state and nothing else, and
// only while the attempt runs: it expires with the phase (lifetime, the
// phase's wall-clock limit; TokenTTL when zero) and is revoked when the
// attempt ends. An untrusted run never gets one: its configuration could
// hand it to anyone.
func (s *Service) IssueToken(ctx context.Context, st Started, lifetime time.Duration) (string, error) {
	if len(s.opts.TokenKey) == 0 {
		return "", fmt.Errorf("run tokens need AUTH_SECRET: %w", fault.ErrUnavailable)
	}
	if st.Run.Untrusted() {
		return "", fmt.Errorf("%w: an untrusted run gets no run token", ErrUntrustedInputs)
	}
	if lifetime <= 0 {
		lifetime = s.opts.TokenTTL
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	token := TokenPrefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(raw[:]))
	_, err := s.db.ExecContext(ctx, `INSERT INTO run_tokens (id, token_hash, organization_id, workspace_id, run_id, attempt_id,
		phase, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, now() + make_interval(secs => $8))`,
		id.New("rtk"), s.tokenHash(token), st.Run.OrganizationID, st.Run.WorkspaceID, st.Run.ID, st.Attempt.ID,
		st.Attempt.Phase, lifetime.Seconds())
	if err != nil {
		return "", fmt.Errorf("issuing run token: %w", err)
	}
	return token, nil
}

// AuthenticateToken resolves a run token to its principal: the run,
// bounded to its workspace, with what a plan or apply needs and nothing
// more. It reads its organization (the entitlements the remote backend
// asks for), its workspace, that workspace's current state (the state
// service refuses it older versions) and the organization's module
// registry in every phase, and writes state only in apply, never for a
// speculative run. It reads no run, plan or plan JSON: the code it runs is
// not trusted with them.
func (s *Service) AuthenticateToken(ctx context.Context, token string) (access.Principal, error) {
	p, _, err := s.AuthenticateTokenSubject(ctx, token)
	return p, err
}

// TokenSubject is what a run token's lookup also reads of the one
// workspace it is bound to: the names a remote-backend path gives it by,
// and its admission facts, so a request of the sandboxed CLI about its own
// workspace is resolved and admitted without another round trip.
type TokenSubject struct {
	OrganizationSlug   string
	WorkspaceCloudName string
	Admission          launch.Facts
}

// AuthenticateTokenSubject is AuthenticateToken that also returns the
// token's subject, read in the same statement.
func (s *Service) AuthenticateTokenSubject(ctx context.Context, token string) (access.Principal, TokenSubject, error) {
	if len(s.opts.TokenKey) == 0 || !strings.HasPrefix(token, TokenPrefix) {
		return access.Principal{}, TokenSubject{}, ErrInvalidToken
	}
	var row struct {
		ID                 string `db:"id"`
		OrganizationID     string `db:"organization_id"`
		WorkspaceID        string `db:"workspace_id"`
		ProjectID          string `db:"project_id"`
		RunID              string `db:"run_id"`
		Phase              string `db:"phase"`
		Kind               string `db:"kind"`
		OrganizationSlug   string `db:"organization_slug"`
		WorkspaceCloudName string `db:"workspace_cloud_name"`
		launch.Facts
	}
	err := s.db.GetContext(ctx, &row, `SELECT t.id, t.organization_id, t.workspace_id, r.project_id, t.run_id, t.phase, r.kind,
		o.slug AS organization_slug, w.cloud_name AS workspace_cloud_name, `+launch.FactsColumns("t.organization_id", "t.workspace_id")+`
		FROM run_tokens t JOIN run_attempts a ON a.id = t.attempt_id JOIN runs r ON r.id = t.run_id
		JOIN organizations o ON o.id = t.organization_id JOIN workspaces w ON w.id = t.workspace_id
		WHERE t.token_hash = $1 AND t.revoked_at IS NULL AND t.expires_at > now() AND a.status = 'running'`, s.tokenHash(token))
	if errors.Is(err, sql.ErrNoRows) {
		return access.Principal{}, TokenSubject{}, ErrInvalidToken
	}
	if err != nil {
		return access.Principal{}, TokenSubject{}, fmt.Errorf("reading run token: %w", err)
	}
	// registry:read lets the sandboxed CLI install the organization's
	// private registry modules (modules.v1) with no credential of a user.
	perms := []access.Permission{access.PermOrganizationRead, access.PermWorkspaceRead, access.PermStateRead, access.PermRegistryRead}
	if row.Phase == PhaseApply && row.Kind != string(KindSpeculative) {
		perms = append(perms, access.PermStateWrite)
	}
	p := access.Principal{
		Kind: access.KindRun, ID: row.RunID, Name: "run " + row.RunID, OrganizationID: row.OrganizationID,
		Role: access.RoleReader, Permissions: access.NewPermissionSet(perms...), TokenID: row.ID,
		ProjectID: row.ProjectID, WorkspaceID: row.WorkspaceID,
	}
	return p, TokenSubject{OrganizationSlug: row.OrganizationSlug, WorkspaceCloudName: row.WorkspaceCloudName, Admission: row.Facts}, nil
}
