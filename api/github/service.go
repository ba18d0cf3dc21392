package github

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/checkrun"
	"github.com/cairnhq/cairn/api/credential"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/workspace"
)

// Limits of the code-host surfaces (SPEC §8).
const (
	MaxWebhookBytes = 10_000_000
	StateLifetime   = 10 * time.Minute
	FenceRetries    = 3
	maxHistory      = 100
)

// Service is the code-host app's domain service.
type Service struct {
	db         *sqlx.DB
	app        *App
	workspaces *workspace.Service
	runs       *run.Service
	jobs       run.JobInserter
	stateKey   []byte
	logger     *slog.Logger
	opts       Options
	now        func() time.Time
}

// Options tune the service.
type Options struct {
	// Checks publishes the neutral check run of a held ingestion; nil
	// publishes none.
	Checks *checkrun.Service
	// Tags publishes what tag pushes concern (registry modules); nil
	// ignores tag pushes.
	Tags TagPublisher
	// ForkRunsPerHour bounds the automatic fork-triggered runs of one
	// repository in any rolling hour (CAIRN_FORK_RUNS_PER_HOUR); at least 1.
	ForkRunsPerHour int
}

// NewService builds the service; app may be nil (unconfigured), and then
// every code-host operation fails closed.
func NewService(conn *sqlx.DB, app *App, workspaces *workspace.Service, runs *run.Service, jobs run.JobInserter,
	stateKey []byte, logger *slog.Logger, opts Options) *Service {
	opts.ForkRunsPerHour = max(opts.ForkRunsPerHour, 1)
	return &Service{db: conn, app: app, workspaces: workspaces, runs: runs, jobs: jobs, stateKey: stateKey, logger: logger,
		opts: opts, now: time.Now}
}

// WithClock returns a copy of the service reading time from now (tests let
// time pass with it).
func (s *Service) WithClock(now func() time.Time) *Service {
	c := *s
	c.now = now
	return &c
}

// App is the configured app, nil when unconfigured.
func (s *Service) App() *App { return s.app }

func (s *Service) stamp() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// --- Installation flow -----------------------------------------------------

// StartedInstallation is the answer to POST /v1/github/installations/start.
type StartedInstallation struct {
	InstallURL string
	ExpiresAt  time.Time
}

// StartInstallation records a single-use state bound to the organization
// and the principal and returns the provider's install URL carrying it.
func (s *Service) StartInstallation(ctx context.Context, tx *sqlx.Tx, p access.Principal) (StartedInstallation, error) {
	if err := p.Require(access.PermVCSInstall); err != nil {
		return StartedInstallation{}, err
	}
	if !s.app.Ready() || s.app.slug == "" {
		return StartedInstallation{}, fmt.Errorf("%w: %w", fault.ErrUnavailable, ErrUnconfigured)
	}
	now := s.stamp()
	stateID := id.New("ghs")
	expires := now.Add(StateLifetime)
	if _, err := tx.ExecContext(ctx, `INSERT INTO github_install_states (id, organization_id, principal_kind, principal_id,
		created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)`, stateID, p.OrganizationID, p.Kind, p.ID, now, expires); err != nil {
		return StartedInstallation{}, fmt.Errorf("recording installation state: %w", err)
	}
	u, err := s.app.InstallURL(s.signState(stateID))
	if err != nil {
		return StartedInstallation{}, err
	}
	return StartedInstallation{InstallURL: u, ExpiresAt: expires},
		audit.Record(ctx, tx, p, "github_installation.started", "github_installation_state", stateID, nil)
}

func (s *Service) signState(stateID string) string {
	mac := hmac.New(sha256.New, s.stateKey)
	mac.Write([]byte(stateID))
	return stateID + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func (s *Service) verifyState(state string) (string, bool) {
	stateID, _, ok := strings.Cut(state, ".")
	if !ok || len(state) > 200 {
		return "", false
	}
	return stateID, hmac.Equal([]byte(s.signState(stateID)), []byte(state))
}

// CompleteInstallation is the installation callback: it verifies the
// state, then binds the installation under the fence — read the fence,
// fetch the installation and its repositories from the provider, and
// commit only if the fence did not move meanwhile. A persistent race is
// ErrFenceRace with the state left unconsumed. Before any of that, the
// installer's authorization code must show that the person completing the
// callback controls the installation's account (App.VerifyInstaller): the
// ID in the setup URL alone proves nothing, and neither does being able
// to see the installation. An unverified installer leaves the state
// unconsumed.
func (s *Service) CompleteInstallation(ctx context.Context, p access.Principal, state, code string, installationID int64) (Installation, error) {
	if !s.app.Ready() {
		return Installation{}, fmt.Errorf("%w: %w", fault.ErrUnavailable, ErrUnconfigured)
	}
	if err := p.Require(access.PermVCSInstall); err != nil {
		return Installation{}, err
	}
	stateID, ok := s.verifyState(state)
	if !ok || installationID <= 0 {
		return Installation{}, ErrStateInvalid
	}
	if err := s.checkState(ctx, s.db, p, stateID, false); err != nil {
		return Installation{}, err
	}
	accountID, err := s.app.VerifyInstaller(ctx, code, installationID)
	if err != nil {
		if errors.Is(err, ErrInstallerUnverified) {
			return Installation{}, err
		}
		return Installation{}, fmt.Errorf("%w: %w", fault.ErrUnavailable, err)
	}
	for range FenceRetries {
		fence, err := readFence(ctx, s.db, installationID)
		if err != nil {
			return Installation{}, err
		}
		remote, err := s.app.Installation(ctx, installationID)
		if err != nil {
			if err == errGone {
				return Installation{}, ErrInstallationInactive
			}
			return Installation{}, fmt.Errorf("%w: %w", fault.ErrUnavailable, err)
		}
		if remote.AccountID != accountID {
			// The account the person was shown to control is not the
			// one the installation is on.
			return Installation{}, ErrInstallerUnverified
		}
		var repos []ProviderRepository
		if !remote.Suspended {
			if repos, err = s.app.Repositories(ctx, installationID); err != nil {
				return Installation{}, fmt.Errorf("%w: %w", fault.ErrUnavailable, err)
			}
		}
		var bound Installation
		raced := false
		err = db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
			if err := s.checkState(ctx, tx, p, stateID, true); err != nil {
				return err
			}
			now := s.stamp()
			f, err := lockFence(ctx, tx, installationID, now)
			if err != nil {
				return err
			}
			if f.Fence != fence {
				raced = true
				return nil
			}
			if f.RevokedAt != nil || remote.Suspended {
				return ErrInstallationInactive
			}
			existing, err := installationByID(ctx, tx, installationID, true)
			if err != nil {
				return err
			}
			switch {
			case existing != nil && existing.OrganizationID != p.OrganizationID:
				// Never moved between organizations.
				return ErrStateInvalid
			case existing != nil && existing.Status != StatusConnected:
				return ErrInstallationInactive
			case existing == nil:
				bound = Installation{InstallationID: installationID, OrganizationID: p.OrganizationID,
					AccountLogin: remote.AccountLogin, AccountID: remote.AccountID, Status: StatusConnected,
					ConnectedAt: now, UpdatedAt: now}
				if err := insertInstallation(ctx, tx, bound); err != nil {
					if db.IsUniqueViolation(err, "github_installations_live_per_organization") {
						return fmt.Errorf("%w: the organization already has an installation", fault.ErrConflict)
					}
					return err
				}
			default:
				bound = *existing
			}
			if _, err := reconcileRepositories(ctx, tx, bound, repos, now); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE github_install_states SET consumed_at = $2, installation_id = $3
				WHERE id = $1`, stateID, now, installationID); err != nil {
				return fmt.Errorf("consuming installation state: %w", err)
			}
			return audit.Record(ctx, tx, p, "github_installation.connected", "github_installation",
				fmt.Sprint(installationID), map[string]any{"account_login": remote.AccountLogin, "repositories": len(repos)})
		})
		if err != nil {
			return Installation{}, err
		}
		if !raced {
			return bound, nil
		}
	}
	return Installation{}, ErrFenceRace
}

// checkState verifies a state row: this organization and principal,
// unconsumed, unexpired. In a transaction it locks the row.
func (s *Service) checkState(ctx context.Context, q sqlx.QueryerContext, p access.Principal, stateID string, lock bool) error {
	query := `SELECT organization_id, principal_kind, principal_id, expires_at, consumed_at FROM github_install_states WHERE id = $1`
	if lock {
		query += ` FOR UPDATE`
	}
	var row struct {
		OrganizationID string     `db:"organization_id"`
		PrincipalKind  string     `db:"principal_kind"`
		PrincipalID    string     `db:"principal_id"`
		ExpiresAt      time.Time  `db:"expires_at"`
		ConsumedAt     *time.Time `db:"consumed_at"`
	}
	if err := sqlx.GetContext(ctx, q, &row, query, stateID); err != nil {
		return ErrStateInvalid
	}
	if row.OrganizationID != p.OrganizationID || row.PrincipalKind != p.Kind || row.PrincipalID != p.ID ||
		row.ConsumedAt != nil || !s.now().Before(row.ExpiresAt) {
		return ErrStateInvalid
	}
	return nil
}

// Status reports the organization's installation.
func (s *Service) Status(ctx context.Context, p access.Principal) (InstallationStatus, error) {
	if err := p.Require(access.PermOrganizationRead); err != nil {
		return InstallationStatus{}, err
	}
	in, err := liveInstallation(ctx, s.db, p.OrganizationID)
	if err != nil || in == nil {
		return InstallationStatus{Status: StatusNotInstalled}, err
	}
	return InstallationStatus{Status: in.Status, InstallationID: &in.InstallationID, AccountLogin: &in.AccountLogin,
		ConnectedAt: &in.ConnectedAt}, nil
}

// Repositories lists the repositories selected in the organization's
// connected installation.
func (s *Service) Repositories(ctx context.Context, p access.Principal) ([]Repository, error) {
	if err := p.Require(access.PermWorkspaceRead); err != nil {
		return nil, err
	}
	return listSelectedRepositories(ctx, s.db, p.OrganizationID)
}

// --- Source settings -------------------------------------------------------

// SaveSource creates the workspace's next immutable source settings
// version. The number is allocated without a lock: two writers racing for
// it collide on the unique key and the loser gets ErrSettingsConflict.
func (s *Service) SaveSource(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID string, in SourceInput) (SourceSettings, error) {
	// workspace:admin in this workspace, not anywhere: binding a
	// repository decides whose code runs with the workspace's secrets.
	w, err := s.workspaces.WorkspaceWith(ctx, p, workspaceID, access.PermWorkspaceAdmin)
	if err != nil {
		return SourceSettings{}, err
	}
	if err := validateSource(&in); err != nil {
		return SourceSettings{}, err
	}
	repo, err := selectedRepository(ctx, tx, w.OrganizationID, in.RepositoryID)
	if err != nil {
		return SourceSettings{}, err
	}
	if repo == nil {
		return SourceSettings{}, fmt.Errorf("%w: repository_id is not selected in the organization's installation", ErrInvalid)
	}
	if in.SpeculativeCredentialVersionID != nil {
		if _, err := credential.SpeculativeVersion(ctx, tx, w.OrganizationID, w.ID, *in.SpeculativeCredentialVersionID); err != nil {
			return SourceSettings{}, fmt.Errorf("%w: speculative_credential_version_id is not a verified, enabled "+
				"speculative_plan federation version of this workspace", ErrInvalid)
		}
	}
	var current int
	if err := sqlx.GetContext(ctx, tx, &current, `SELECT coalesce(max(version), 0) FROM workspace_source_settings
		WHERE workspace_id = $1`, w.ID); err != nil {
		return SourceSettings{}, fmt.Errorf("reading source settings version: %w", err)
	}
	paths := in.TriggerPaths
	if paths == nil {
		paths = []string{}
	}
	st := SourceSettings{
		ID: id.New("src"), OrganizationID: w.OrganizationID, WorkspaceID: w.ID, Version: current + 1,
		InstallationID: repo.InstallationID, RepositoryID: repo.RepositoryID, RepositoryOwner: repo.Owner,
		RepositoryName: repo.Name, TrackedBranch: in.TrackedBranch, WorkingDirectory: in.WorkingDirectory,
		TriggerPaths: paths, SpeculativeCredentialVersionID: in.SpeculativeCredentialVersionID,
		ForkPullRequests: in.ForkPullRequests, CreatedByKind: p.Kind, CreatedByID: p.ID, CreatedAt: s.stamp(),
	}
	if err := insertSettings(ctx, tx, st); err != nil {
		if db.IsUniqueViolation(err, "workspace_source_settings_version") {
			return SourceSettings{}, ErrSettingsConflict
		}
		return SourceSettings{}, err
	}
	return st, audit.Record(ctx, tx, p, "workspace_source.updated", "workspace_source_settings", st.ID, map[string]any{
		"workspace_id": w.ID, "version": st.Version, "repository_id": st.RepositoryID, "trigger_paths": len(paths),
		"fork_pull_requests": st.ForkPullRequests,
	})
}

// validateSource checks and normalizes source settings input.
func validateSource(in *SourceInput) error {
	if in.RepositoryID <= 0 {
		return fmt.Errorf("%w: repository_id is required", ErrInvalid)
	}
	switch in.ForkPullRequests {
	case "":
		in.ForkPullRequests = ForksHold
	case ForksHold, ForksPlan:
	default:
		return fmt.Errorf("%w: fork_pull_requests must be hold or plan", ErrInvalid)
	}
	if !validBranch(in.TrackedBranch) {
		return fmt.Errorf("%w: tracked_branch is not a valid branch name", ErrInvalid)
	}
	wd, ok := CleanDirectory(in.WorkingDirectory)
	if !ok {
		return fmt.Errorf("%w: working_directory must be a repository-relative path", ErrInvalid)
	}
	in.WorkingDirectory = wd
	return ValidateTriggerPaths(in.TriggerPaths)
}

// CleanDirectory checks a repository-relative directory ("" is the root)
// and returns it without a trailing slash; false when it is absolute,
// traverses, has empty, "." or ".." segments, a backslash or a NUL, or is
// longer than 1,024 bytes.
func CleanDirectory(wd string) (string, bool) {
	if wd == "" {
		return "", true
	}
	if len(wd) > 1024 || strings.HasPrefix(wd, "/") || strings.Contains(wd, "\\") || strings.ContainsRune(wd, 0) {
		return "", false
	}
	for _, seg := range strings.Split(strings.TrimSuffix(wd, "/"), "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", false
		}
	}
	return path.Clean(strings.TrimSuffix(wd, "/")), true
}

// validBranch follows git's reference name rules closely enough to refuse
// anything git would.
func validBranch(b string) bool {
	if b == "" || len(b) > 255 || strings.HasPrefix(b, "-") || strings.HasPrefix(b, "/") || strings.HasSuffix(b, "/") ||
		strings.HasSuffix(b, ".") || strings.HasSuffix(b, ".lock") || strings.Contains(b, "..") || strings.Contains(b, "//") ||
		strings.Contains(b, "@{") || b == "@" || strings.HasPrefix(b, "refs/") {
		return false
	}
	for _, r := range b {
		if r <= 0x20 || r == 0x7f || strings.ContainsRune("~^:?*[\\", r) {
			return false
		}
	}
	for _, seg := range strings.Split(b, "/") {
		if strings.HasPrefix(seg, ".") {
			return false
		}
	}
	return true
}

// SourceHistory is a workspace's current source settings and history.
func (s *Service) SourceHistory(ctx context.Context, p access.Principal, workspaceID string) ([]SourceSettings, error) {
	if err := p.Require(access.PermWorkspaceRead); err != nil {
		return nil, err
	}
	w, err := s.workspaces.GetWorkspace(ctx, p, workspaceID)
	if err != nil {
		return nil, err
	}
	return settingsHistory(ctx, s.db, w.OrganizationID, w.ID, maxHistory)
}

// CheckTargetOf is where the check run of a code-host run belongs, or nil
// for a run the code host did not create (or whose ingestion is not ready).
func CheckTargetOf(ctx context.Context, q sqlx.QueryerContext, runID string) (*CheckTarget, error) {
	var t CheckTarget
	err := sqlx.GetContext(ctx, q, &t, `SELECT id, organization_id, run_id, installation_id, repository_id,
			repository_owner, repository_name, commit_sha
		FROM source_ingestions WHERE run_id = $1 AND status = 'ready'`, runID)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading check target: %w", err)
	}
	return &t, nil
}

// Provenance is the source chain of a code-host run (SPEC §2): delivery →
// ingestion → configuration version → normalized archive → run.
type Provenance struct {
	Provider               string
	CommitSHA              string
	CommitMessage          string
	Ref                    string
	RepositoryOwner        string
	RepositoryName         string
	WorkingDirectory       string
	IngestionID            string
	IngestionStatus        string
	WorkflowID             string
	DeliveryID             string
	ConfigurationVersionID string
	ArchiveSHA256          string
	ConfigurationArtifact  string
	PullNumber             *int
	Fork                   bool
	PlanApprovedBy         *string
}

// ProvenanceOf reads and cross-checks the chain of a run whose pinned
// source is src. Every link must agree with the run's pinned facts; an
// incomplete or ambiguous chain is (nil, nil): the review then reports no
// provenance at all rather than a partial one.
func ProvenanceOf(ctx context.Context, q sqlx.QueryerContext, runID, configurationVersionID string, configurationDigest []byte,
	src *run.CodeHostSource) (*Provenance, error) {
	if src == nil {
		return nil, nil
	}
	var rows []struct {
		Ingestion
		BlobKey *string `db:"blob_key"`
	}
	err := sqlx.SelectContext(ctx, q, &rows, `SELECT `+prefixed("i.", ingestionColumns)+`, c.blob_key
		FROM source_ingestions i JOIN configuration_versions c ON c.id = i.configuration_version_id
		WHERE i.run_id = $1`, runID)
	if err != nil {
		return nil, fmt.Errorf("reading source provenance: %w", err)
	}
	if len(rows) != 1 {
		return nil, nil
	}
	in := rows[0]
	var delivered int
	if err := sqlx.GetContext(ctx, q, &delivered, `SELECT count(*) FROM source_ingestion_deliveries
		WHERE ingestion_id = $1 AND delivery_id = $2`, in.ID, src.DeliveryID); err != nil {
		return nil, fmt.Errorf("reading source provenance: %w", err)
	}
	digest := hex.EncodeToString(in.ArchiveSHA256)
	if in.Status != IngestionReady || in.CommitSHA == nil || *in.CommitSHA != src.CommitSHA || in.ID != src.IngestionID ||
		in.ConfigurationVersionID == nil || *in.ConfigurationVersionID != configurationVersionID ||
		src.ConfigurationVersionID != configurationVersionID || digest != hex.EncodeToString(configurationDigest) ||
		digest != src.ArchiveSHA256 || delivered != 1 || in.BlobKey == nil || in.Fork != src.Fork ||
		!equalPtr(in.PlanApprovedBy, src.PlanApprovedBy) {
		return nil, nil
	}
	msg := ""
	if in.CommitMessage != nil {
		msg = *in.CommitMessage
	}
	return &Provenance{Provider: src.Provider, CommitSHA: src.CommitSHA, CommitMessage: msg, Ref: src.Ref,
		RepositoryOwner: src.Owner, RepositoryName: src.Name, WorkingDirectory: src.WorkingDirectory, IngestionID: in.ID,
		IngestionStatus: in.Status, WorkflowID: WorkflowIDOf(in.ID), DeliveryID: src.DeliveryID,
		ConfigurationVersionID: configurationVersionID, ArchiveSHA256: digest,
		ConfigurationArtifact: in.ConfigurationArtifactID, PullNumber: src.PullNumber, Fork: src.Fork,
		PlanApprovedBy: src.PlanApprovedBy}, nil
}

func prefixed(prefix, columns string) string {
	parts := strings.Split(columns, ",")
	for i, c := range parts {
		parts[i] = prefix + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}
