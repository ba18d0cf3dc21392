package credential

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/platform/cursor"
)

const profileColumns = `id, organization_id, workspace_id, provider, name, current_version_id, activated_at, archived_at,
	version_count, created_by_kind, created_by_id, created_at, updated_at`

func insertProfile(ctx context.Context, q sqlx.ExtContext, p Profile) error {
	_, err := q.ExecContext(ctx, `INSERT INTO credential_profiles (id, organization_id, workspace_id, provider, name,
		created_by_kind, created_by_id, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)`,
		p.ID, p.OrganizationID, p.WorkspaceID, p.Provider, p.Name, p.CreatedByKind, p.CreatedByID, p.CreatedAt)
	if err != nil {
		return fmt.Errorf("inserting credential profile: %w", err)
	}
	return nil
}

// profileByID reads a profile of an organization; forUpdate locks it.
func profileByID(ctx context.Context, q sqlx.QueryerContext, organizationID, profileID string, forUpdate bool) (Profile, error) {
	query := `SELECT ` + profileColumns + ` FROM credential_profiles WHERE id = $1 AND organization_id = $2`
	if forUpdate {
		query += ` FOR UPDATE`
	}
	var p Profile
	err := sqlx.GetContext(ctx, q, &p, query, profileID, organizationID)
	if errors.Is(err, sql.ErrNoRows) {
		return Profile{}, notFound
	}
	if err != nil {
		return Profile{}, fmt.Errorf("reading credential profile: %w", err)
	}
	return p, nil
}

func saveProfile(ctx context.Context, q sqlx.ExtContext, p Profile) error {
	_, err := q.ExecContext(ctx, `UPDATE credential_profiles SET current_version_id = $2, activated_at = $3, archived_at = $4,
		version_count = $5, updated_at = $6 WHERE id = $1`, p.ID, p.CurrentVersionID, p.ActivatedAt, p.ArchivedAt,
		p.VersionCount, p.UpdatedAt)
	if err != nil {
		return fmt.Errorf("writing credential profile: %w", err)
	}
	return nil
}

func countProfiles(ctx context.Context, q sqlx.QueryerContext, workspaceID string) (int, error) {
	var n int
	if err := sqlx.GetContext(ctx, q, &n, `SELECT count(*) FROM credential_profiles WHERE workspace_id = $1`, workspaceID); err != nil {
		return 0, fmt.Errorf("counting credential profiles: %w", err)
	}
	return n, nil
}

func listProfiles(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID string, page cursor.Page) ([]Profile, error) {
	keyset, args := page.Keyset([]any{organizationID, workspaceID}, "created_at", "id")
	var out []Profile
	if err := sqlx.SelectContext(ctx, q, &out, `SELECT `+profileColumns+` FROM credential_profiles
		WHERE organization_id = $1 AND workspace_id = $2`+keyset+page.OrderLimit("created_at", "id"), args...); err != nil {
		return nil, fmt.Errorf("listing credential profiles: %w", err)
	}
	return out, nil
}

const versionColumns = `id, organization_id, profile_id, number, provider, audience, phase, configuration, environment_names,
	sealed_environment, verified_at, disabled_at, created_by_kind, created_by_id, created_at`

func insertVersion(ctx context.Context, q sqlx.ExtContext, v Version) error {
	var cfg any
	if v.Configuration != nil {
		body, err := json.Marshal(v.Configuration.FederationConfig)
		if err != nil {
			return err
		}
		cfg = string(body)
	}
	var names any
	if v.EnvironmentNames != nil {
		names = v.EnvironmentNames
	}
	_, err := q.ExecContext(ctx, `INSERT INTO credential_profile_versions (id, organization_id, profile_id, number, provider,
		audience, phase, configuration, environment_names, sealed_environment, created_by_kind, created_by_id, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		v.ID, v.OrganizationID, v.ProfileID, v.Number, v.Provider, v.Audience, v.Phase, cfg, names, v.Sealed,
		v.CreatedByKind, v.CreatedByID, v.CreatedAt)
	if err != nil {
		return fmt.Errorf("inserting credential profile version: %w", err)
	}
	return nil
}

// versionByID reads a version of a profile of an organization: a version
// of another profile is not found, like a missing one.
func versionByID(ctx context.Context, q sqlx.QueryerContext, organizationID, profileID, versionID string, forUpdate bool) (Version, error) {
	query := `SELECT ` + versionColumns + ` FROM credential_profile_versions WHERE id = $1 AND organization_id = $2 AND profile_id = $3`
	if forUpdate {
		query += ` FOR UPDATE`
	}
	var v Version
	err := sqlx.GetContext(ctx, q, &v, query, versionID, organizationID, profileID)
	if errors.Is(err, sql.ErrNoRows) {
		return Version{}, notFound
	}
	if err != nil {
		return Version{}, fmt.Errorf("reading credential profile version: %w", err)
	}
	return v, nil
}

// markVersion writes the two marks a version may gain.
func markVersion(ctx context.Context, q sqlx.ExtContext, v Version) error {
	if _, err := q.ExecContext(ctx, `UPDATE credential_profile_versions SET verified_at = $2, disabled_at = $3 WHERE id = $1`,
		v.ID, v.VerifiedAt, v.DisabledAt); err != nil {
		return fmt.Errorf("writing credential profile version: %w", err)
	}
	return nil
}

func listVersions(ctx context.Context, q sqlx.QueryerContext, organizationID, profileID string, page cursor.Page) ([]Version, error) {
	keyset, args := page.Keyset([]any{organizationID, profileID}, "created_at", "id")
	var out []Version
	if err := sqlx.SelectContext(ctx, q, &out, `SELECT `+versionColumns+` FROM credential_profile_versions
		WHERE organization_id = $1 AND profile_id = $2`+keyset+page.OrderLimit("created_at", "id"), args...); err != nil {
		return nil, fmt.Errorf("listing credential profile versions: %w", err)
	}
	return out, nil
}

// withCurrentVersions pairs profiles with their current versions, read
// in one query.
func withCurrentVersions(ctx context.Context, q sqlx.QueryerContext, organizationID string, profiles []Profile) ([]Candidate, error) {
	var ids []string
	for _, p := range profiles {
		if p.CurrentVersionID != nil {
			ids = append(ids, *p.CurrentVersionID)
		}
	}
	current := map[string]Version{}
	if len(ids) > 0 {
		var rows []Version
		if err := sqlx.SelectContext(ctx, q, &rows, `SELECT `+versionColumns+` FROM credential_profile_versions
			WHERE organization_id = $1 AND id = ANY($2)`, organizationID, pq.StringArray(ids)); err != nil {
			return nil, fmt.Errorf("reading current versions: %w", err)
		}
		for _, v := range rows {
			current[v.ProfileID] = v
		}
	}
	out := make([]Candidate, 0, len(profiles))
	for _, p := range profiles {
		c := Candidate{Profile: p}
		if v, ok := current[p.ID]; ok {
			c.Current = &v
		}
		out = append(out, c)
	}
	return out, nil
}

// candidates are a workspace's profiles that are not archived, in creation
// order, each with its current version.
func candidates(ctx context.Context, q sqlx.QueryerContext, organizationID, workspaceID string) ([]Candidate, error) {
	var profiles []Profile
	if err := sqlx.SelectContext(ctx, q, &profiles, `SELECT `+profileColumns+` FROM credential_profiles
		WHERE organization_id = $1 AND workspace_id = $2 AND archived_at IS NULL ORDER BY created_at, id`,
		organizationID, workspaceID); err != nil {
		return nil, fmt.Errorf("reading credential profiles: %w", err)
	}
	return withCurrentVersions(ctx, q, organizationID, profiles)
}

// pinnedRow is a pinned version as issuance and redemption recheck it.
type pinnedRow struct {
	Version
	ArchivedAt *time.Time `db:"archived_at"`
}

// pinnedVersions reads the versions a run pinned with their profiles'
// archive marks; the version row locks are shared, so a revoke waits for
// an issuance or redemption in progress and is seen by the next one.
func pinnedVersions(ctx context.Context, q sqlx.QueryerContext, organizationID string, refs []Ref) (map[string]pinnedRow, error) {
	ids := make([]string, 0, len(refs))
	for _, r := range refs {
		ids = append(ids, r.VersionID)
	}
	var rows []pinnedRow
	if err := sqlx.SelectContext(ctx, q, &rows, `SELECT v.id, v.organization_id, v.profile_id, v.number, v.provider, v.audience,
		v.phase, v.configuration, v.environment_names, v.sealed_environment, v.verified_at, v.disabled_at, v.created_by_kind,
		v.created_by_id, v.created_at, p.archived_at
		FROM credential_profile_versions v JOIN credential_profiles p ON p.id = v.profile_id
		WHERE v.organization_id = $1 AND v.id = ANY($2) FOR SHARE OF v, p`, organizationID, pq.StringArray(ids)); err != nil {
		return nil, fmt.Errorf("reading pinned credential versions: %w", err)
	}
	out := make(map[string]pinnedRow, len(rows))
	for _, r := range rows {
		out[r.ID] = r
	}
	return out, nil
}

// handleRow is an issued handle.
type handleRow struct {
	ID             string     `db:"id"`
	OrganizationID string     `db:"organization_id"`
	RunID          string     `db:"run_id"`
	AttemptID      string     `db:"attempt_id"`
	Phase          string     `db:"phase"`
	ManifestDigest []byte     `db:"manifest_digest"`
	NonceDigest    []byte     `db:"nonce_digest"`
	RedeemedAt     *time.Time `db:"redeemed_at"`
	Live           bool       `db:"live"`
}

func insertHandle(ctx context.Context, q sqlx.ExtContext, h handleRow, handleHash []byte, ttl time.Duration) error {
	_, err := q.ExecContext(ctx, `INSERT INTO credential_handles (id, organization_id, run_id, attempt_id, phase, handle_hash,
		manifest_digest, nonce_digest, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now() + make_interval(secs => $9))`,
		h.ID, h.OrganizationID, h.RunID, h.AttemptID, h.Phase, handleHash, h.ManifestDigest, h.NonceDigest, ttl.Seconds())
	if err != nil {
		return fmt.Errorf("issuing credential handle: %w", err)
	}
	return nil
}

// handleForRedemption locks a handle by its keyed digest; live says
// whether it is unexpired on the database clock.
func handleForRedemption(ctx context.Context, q sqlx.QueryerContext, handleHash []byte) (handleRow, error) {
	var h handleRow
	err := sqlx.GetContext(ctx, q, &h, `SELECT id, organization_id, run_id, attempt_id, phase, manifest_digest, nonce_digest,
		redeemed_at, expires_at > now() AS live FROM credential_handles WHERE handle_hash = $1 FOR UPDATE`, handleHash)
	if errors.Is(err, sql.ErrNoRows) {
		return handleRow{}, ErrHandleInvalid
	}
	if err != nil {
		return handleRow{}, fmt.Errorf("reading credential handle: %w", err)
	}
	return h, nil
}

// runFacts are the names a token's claims carry beside the IDs, read for
// a running attempt.
type runFacts struct {
	AttemptStatus    string `db:"attempt_status"`
	OrganizationID   string `db:"organization_id"`
	OrganizationName string `db:"organization_name"`
	ProjectID        string `db:"project_id"`
	ProjectName      string `db:"project_name"`
	WorkspaceID      string `db:"workspace_id"`
	WorkspaceName    string `db:"workspace_name"`
	RunID            string `db:"run_id"`
	// RunInitiator is who started the run (a person, an agent, the code
	// host, ...), for the run_initiator claim.
	RunInitiator string `db:"run_initiator"`
	// Untrusted is set for a run whose configuration nobody trusted has
	// looked at: it is never given credentials.
	Untrusted bool `db:"untrusted"`
}

func attemptFacts(ctx context.Context, q sqlx.QueryerContext, attemptID string) (runFacts, error) {
	var f runFacts
	err := sqlx.GetContext(ctx, q, &f, `SELECT a.status AS attempt_status, r.organization_id, o.name AS organization_name,
		r.project_id, p.name AS project_name, r.workspace_id, w.name AS workspace_name, r.id AS run_id,
		r.initiator AS run_initiator, r.untrusted_reason IS NOT NULL AS untrusted
		FROM run_attempts a JOIN runs r ON r.id = a.run_id JOIN organizations o ON o.id = r.organization_id
		JOIN projects p ON p.id = r.project_id JOIN workspaces w ON w.id = r.workspace_id
		WHERE a.id = $1`, attemptID)
	if errors.Is(err, sql.ErrNoRows) {
		return runFacts{}, ErrHandleInvalid
	}
	if err != nil {
		return runFacts{}, fmt.Errorf("reading attempt: %w", err)
	}
	return f, nil
}
