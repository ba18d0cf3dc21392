package policy

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/archive"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/blob"
	"github.com/cairnhq/cairn/api/platform/blobkey"
	"github.com/cairnhq/cairn/api/platform/capability"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/policy/rego"
	"github.com/cairnhq/cairn/api/workspace"
)

// MaxSourceBytes is the exact limit of a policy source archive (SPEC §8),
// the same as a compiled bundle's.
const MaxSourceBytes = rego.MaxBundleBytes

// JobInserter inserts River jobs inside a caller's transaction.
type JobInserter interface {
	InsertTx(ctx context.Context, tx *sql.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// Options tune the policy service.
type Options struct {
	// EvaluationTimeout bounds one attachment's evaluation.
	EvaluationTimeout time.Duration
	// Capabilities signs and checks bundle grants; its zero value signs
	// grants nobody accepts.
	Capabilities capability.Signer
}

// Service holds policy sets, their versions and builds, attachments, and
// the evaluation of a run's snapshotted attachments.
type Service struct {
	db         *sqlx.DB
	blobs      *blob.Store
	workspaces *workspace.Service
	launch     *launch.Service
	jobs       JobInserter
	logger     *slog.Logger
	opts       Options
	now        func() time.Time
}

// NewService returns the policy service. blobs may be nil (no master key):
// uploads, builds and evaluations then fail closed. Launch control routes
// build jobs and admits each build when it starts.
func NewService(conn *sqlx.DB, blobs *blob.Store, workspaces *workspace.Service, admission *launch.Service, jobs JobInserter,
	logger *slog.Logger, opts Options) *Service {
	if opts.EvaluationTimeout <= 0 {
		opts.EvaluationTimeout = 10 * time.Second
	}
	return &Service{db: conn, blobs: blobs, workspaces: workspaces, launch: admission, jobs: jobs, logger: logger, opts: opts,
		now: time.Now}
}

// WithClock returns a copy of the service that reads the time from now, so
// a test can let time pass (dispatch backoff, claims) without waiting.
func (s *Service) WithClock(now func() time.Time) *Service {
	c := *s
	c.now = now
	return &c
}

func (s *Service) stamp() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

func (s *Service) storage() (*blob.Store, error) {
	if s.blobs == nil {
		return nil, fmt.Errorf("%w: artifact storage needs CAIRN_MASTER_KEY", fault.ErrUnavailable)
	}
	return s.blobs, nil
}

// SetInput is how a policy set is created.
type SetInput struct {
	Name        string
	Description string
}

func validSetName(name string) bool {
	if len(name) < 1 || len(name) > 100 {
		return false
	}
	for i, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || i > 0 && strings.ContainsRune("._-", c)
		if !ok {
			return false
		}
	}
	return true
}

// CreateSet creates a named policy set in the principal's organization.
func (s *Service) CreateSet(ctx context.Context, tx *sqlx.Tx, p access.Principal, in SetInput) (Set, error) {
	if err := p.Require(access.PermPolicyWrite); err != nil {
		return Set{}, err
	}
	if !validSetName(in.Name) {
		return Set{}, fmt.Errorf("%w: name must be 1–100 letters, digits, '.', '_' or '-', starting with a letter or digit", ErrInvalid)
	}
	if len([]rune(in.Description)) > 2000 {
		return Set{}, fmt.Errorf("%w: description is over 2,000 characters", ErrInvalid)
	}
	set := Set{ID: id.New("pol"), OrganizationID: p.OrganizationID, Name: in.Name, Description: in.Description,
		CreatedByKind: p.Kind, CreatedByID: p.ID, CreatedAt: s.stamp()}
	if err := insertSet(ctx, tx, set); err != nil {
		return Set{}, err
	}
	return set, audit.Record(ctx, tx, p, "policy_set.created", "policy_set", set.ID, map[string]any{"name": set.Name})
}

// GetSet reads one set of the principal's organization.
func (s *Service) GetSet(ctx context.Context, p access.Principal, setID string) (Set, error) {
	if err := p.Require(access.PermPolicyRead); err != nil {
		return Set{}, err
	}
	return setByID(ctx, s.db, p.OrganizationID, setID, false)
}

// ListSets lists the organization's sets by name.
func (s *Service) ListSets(ctx context.Context, p access.Principal) ([]Set, error) {
	if err := p.Require(access.PermPolicyRead); err != nil {
		return nil, err
	}
	return listSets(ctx, s.db, p.OrganizationID)
}

// ListVersions lists a set's versions, newest first.
func (s *Service) ListVersions(ctx context.Context, p access.Principal, setID string) ([]Version, error) {
	if _, err := s.GetSet(ctx, p, setID); err != nil {
		return nil, err
	}
	return listVersions(ctx, s.db, p.OrganizationID, setID)
}

// GetVersion reads one version of the principal's organization.
func (s *Service) GetVersion(ctx context.Context, p access.Principal, versionID string) (Version, error) {
	if err := p.Require(access.PermPolicyRead); err != nil {
		return Version{}, err
	}
	return versionByID(ctx, s.db, p.OrganizationID, versionID, false)
}

// ReadyToUpload checks, before any byte is read, that the principal may
// publish a version of the set built in the workspace.
func (s *Service) ReadyToUpload(ctx context.Context, p access.Principal, workspaceID, setID string) error {
	if _, err := s.storage(); err != nil {
		return err
	}
	if err := p.Require(access.PermPolicyWrite); err != nil {
		return err
	}
	if _, err := s.workspaces.GetWorkspace(ctx, p, workspaceID); err != nil {
		return err
	}
	_, err := setByID(ctx, s.db, p.OrganizationID, setID, false)
	return err
}

// StagedSource is a validated, sealed source archive whose version row is
// not written yet.
type StagedSource struct {
	OrganizationID string
	WorkspaceID    string
	SetID          string
	// Identity is derived from tenant, workspace, set and idempotency key,
	// so a retried upload names the same source object; it is the
	// authenticated-encryption context of the sealed archive.
	Identity string
	Key      string
	Digests  blob.Digests
}

// SourceIdentity derives a source object's identity from its tenant,
// workspace, set and the upload's idempotency key.
func SourceIdentity(organizationID, workspaceID, setID, idempotencyKey string) string {
	sum := sha256.Sum256([]byte(organizationID + "\x00" + workspaceID + "\x00" + setID + "\x00" + idempotencyKey))
	return "cairn/policy-source/" + organizationID + "/" + hex.EncodeToString(sum[:16])
}

// StageSource streams and validates a source archive into sealed storage
// so that its version row, audit evidence and dispatch record can be
// written in one transaction afterwards.
func (s *Service) StageSource(ctx context.Context, p access.Principal, workspaceID, setID, idempotencyKey string, r io.Reader) (StagedSource, error) {
	blobs, err := s.storage()
	if err != nil {
		return StagedSource{}, err
	}
	st := StagedSource{OrganizationID: p.OrganizationID, WorkspaceID: workspaceID, SetID: setID,
		Identity: SourceIdentity(p.OrganizationID, workspaceID, setID, idempotencyKey)}
	st.Key = blobkey.PolicySource(p.OrganizationID)
	_, st.Digests, err = archive.Store(ctx, blobs, st.Key, st.Identity, r, MaxSourceBytes)
	if err != nil {
		_ = blobs.Delete(context.WithoutCancel(ctx), st.Key)
		if code := archive.CodeOf(err); code != "" {
			return StagedSource{}, SourceError{Code: code}
		}
		return StagedSource{}, err
	}
	return st, nil
}

// DiscardStaged deletes a staged source no row references.
func (s *Service) DiscardStaged(ctx context.Context, st StagedSource) {
	if s.blobs != nil && st.Key != "" {
		_ = s.blobs.Delete(context.WithoutCancel(ctx), st.Key)
	}
}

// RebuildInput names a committed source artifact to build again.
type RebuildInput struct {
	WorkspaceID      string
	SourceArtifactID string
	SourceSHA256     string
}

// RebuildVersion creates a new pending version of a set from a source
// archive already committed for it (for example to rebuild it under
// another workspace's settings). Only trusted clients (workspace:admin)
// may name artifacts; the digest must match the committed one.
func (s *Service) RebuildVersion(ctx context.Context, tx *sqlx.Tx, p access.Principal, setID string, in RebuildInput) (Version, error) {
	if err := p.Require(access.PermPolicyWrite); err != nil {
		return Version{}, err
	}
	if err := p.Require(access.PermWorkspaceAdmin); err != nil {
		return Version{}, err
	}
	var src struct {
		Artifact
		SetID    string `db:"policy_set_id"`
		Identity string `db:"source_identity"`
	}
	err := sqlx.GetContext(ctx, tx, &src, `SELECT a.id, a.organization_id, a.policy_version_id, a.kind, a.blob_key, a.size_bytes,
		a.sha256, a.created_at, v.policy_set_id, v.source_identity FROM policy_artifacts a
		JOIN policy_versions v ON v.id = a.policy_version_id
		WHERE a.id = $1 AND a.organization_id = $2 AND a.kind = 'source'`, in.SourceArtifactID, p.OrganizationID)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && src.SetID != setID) {
		return Version{}, fault.ErrNotFound
	}
	if err != nil {
		return Version{}, fmt.Errorf("reading policy source artifact: %w", err)
	}
	if hex.EncodeToString(src.SHA256) != in.SourceSHA256 {
		return Version{}, ErrSourceMismatch
	}
	return s.CreateVersion(ctx, tx, p, StagedSource{OrganizationID: p.OrganizationID, WorkspaceID: in.WorkspaceID, SetID: setID,
		Identity: src.Identity, Key: src.BlobKey, Digests: blob.Digests{Size: src.SizeBytes, SHA256: src.SHA256}})
}

// CreateVersion writes a pending version of a staged source, its source
// artifact row, audit evidence, the durable dispatch record and the build
// job, all in the caller's transaction.
func (s *Service) CreateVersion(ctx context.Context, tx *sqlx.Tx, p access.Principal, st StagedSource) (Version, error) {
	if err := p.Require(access.PermPolicyWrite); err != nil {
		return Version{}, err
	}
	w, err := s.workspaces.WorkspaceForWrite(ctx, tx, p, st.WorkspaceID, access.PermPolicyWrite)
	if err != nil {
		return Version{}, err
	}
	if w.OrganizationID != st.OrganizationID {
		return Version{}, fault.ErrNotFound
	}
	set, err := setByID(ctx, tx, p.OrganizationID, st.SetID, true)
	if err != nil {
		return Version{}, err
	}
	number := set.LatestVersion + 1
	if _, err := tx.ExecContext(ctx, `UPDATE policy_sets SET latest_version = $2 WHERE id = $1`, set.ID, number); err != nil {
		return Version{}, fmt.Errorf("numbering policy version: %w", err)
	}
	capabilitiesDigest, err := rego.CapabilitiesDigest()
	if err != nil {
		return Version{}, fmt.Errorf("%w: %w", fault.ErrUnavailable, err)
	}
	now := s.stamp()
	v := Version{
		ID: id.New("pol"), OrganizationID: p.OrganizationID, PolicySetID: set.ID, Number: number, WorkspaceID: w.ID,
		SettingsVersion: w.SettingsVersion, ToolVersion: w.ToolVersion, Region: w.Region, Status: VersionPending,
		SourceIdentity: st.Identity, SourceSHA256: st.Digests.SHA256, SourceSize: st.Digests.Size,
		EngineVersion: rego.EngineVersion, CapabilitiesID: rego.CapabilitiesID, CapabilitiesSHA256: capabilitiesDigest,
		Entrypoint: rego.Entrypoint, CreatedByKind: p.Kind, CreatedByID: p.ID, CreatedAt: now,
	}
	if err := insertVersion(ctx, tx, v); err != nil {
		return Version{}, err
	}
	source := Artifact{ID: id.New("pol"), OrganizationID: v.OrganizationID, PolicyVersionID: v.ID, Kind: ArtifactSource,
		BlobKey: st.Key, SizeBytes: st.Digests.Size, SHA256: st.Digests.SHA256, CreatedAt: now}
	if err := insertArtifact(ctx, tx, source); err != nil {
		return Version{}, err
	}
	v.SourceArtifactID = source.ID
	if err := s.dispatchPublication(ctx, tx, v, now); err != nil {
		return Version{}, err
	}
	return v, audit.Record(ctx, tx, p, "policy_version.uploaded", "policy_version", v.ID, map[string]any{
		"policy_set_id": set.ID, "number": number, "workspace_id": w.ID, "settings_version": w.SettingsVersion,
		"source_sha256": hex.EncodeToString(st.Digests.SHA256), "size_bytes": st.Digests.Size,
	})
}

// AttachInput is how a version is attached.
type AttachInput struct {
	PolicySetID     string
	PolicyVersionID string
	EnforcementMode string
	// Scope and ScopeID place the attachment; ScopeID is ignored for the
	// organization scope.
	Scope   string
	ScopeID string
}

// AttachToWorkspace attaches a published version at workspace scope.
func (s *Service) AttachToWorkspace(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID string, in AttachInput) (Attachment, error) {
	in.Scope, in.ScopeID = ScopeWorkspace, workspaceID
	return s.Attach(ctx, tx, p, in)
}

// Attach attaches a published version at any scope. Organization and
// project scopes reach many workspaces, so they need workspace:admin too.
func (s *Service) Attach(ctx context.Context, tx *sqlx.Tx, p access.Principal, in AttachInput) (Attachment, error) {
	if err := p.Require(access.PermPolicyWrite); err != nil {
		return Attachment{}, err
	}
	if !slices.Contains(Modes, in.EnforcementMode) {
		return Attachment{}, fmt.Errorf("%w: enforcement_mode must be advisory, soft_mandatory or hard_mandatory", ErrInvalid)
	}
	if in.Scope == ScopeOrganization {
		in.ScopeID = p.OrganizationID
	}
	if err := s.requireScope(ctx, tx, p, in.Scope, in.ScopeID); err != nil {
		return Attachment{}, err
	}
	v, err := versionByID(ctx, tx, p.OrganizationID, in.PolicyVersionID, false)
	if err != nil {
		return Attachment{}, err
	}
	if in.PolicySetID != "" && v.PolicySetID != in.PolicySetID {
		return Attachment{}, fault.ErrNotFound
	}
	if v.Status != VersionPublished {
		return Attachment{}, ErrVersionNotPublished
	}
	a := Attachment{ID: id.New("pol"), OrganizationID: p.OrganizationID, PolicySetID: v.PolicySetID, PolicyVersionID: v.ID,
		Scope: in.Scope, ScopeID: in.ScopeID, EnforcementMode: in.EnforcementMode, Status: AttachmentActive,
		CreatedByKind: p.Kind, CreatedByID: p.ID, CreatedAt: s.stamp()}
	if err := insertAttachment(ctx, tx, a); err != nil {
		return Attachment{}, err
	}
	return a, audit.Record(ctx, tx, p, "policy_attachment.created", "policy_attachment", a.ID, map[string]any{
		"policy_set_id": a.PolicySetID, "policy_version_id": a.PolicyVersionID, "scope": a.Scope, "scope_id": a.ScopeID,
		"enforcement_mode": a.EnforcementMode,
	})
}

// requireScope checks that the principal may change attachments at a
// scope. Organization and project scopes reach many workspaces, so they
// need workspace:admin and a token bounded to less may not use them.
func (s *Service) requireScope(ctx context.Context, tx *sqlx.Tx, p access.Principal, scope, scopeID string) error {
	switch scope {
	case ScopeOrganization:
		if p.ProjectID != "" || p.WorkspaceID != "" {
			return fault.ErrForbidden
		}
		return p.Require(access.PermWorkspaceAdmin)
	case ScopeProject:
		if p.WorkspaceID != "" || (p.ProjectID != "" && p.ProjectID != scopeID) {
			return fault.ErrNotFound
		}
		if err := p.Require(access.PermWorkspaceAdmin); err != nil {
			return err
		}
		_, err := s.workspaces.GetProject(ctx, p, scopeID)
		return err
	case ScopeWorkspace:
		_, err := s.workspaces.WorkspaceForWrite(ctx, tx, p, scopeID, access.PermPolicyWrite)
		return err
	}
	return fmt.Errorf("%w: scope must be organization, project or workspace", ErrInvalid)
}

// DetachFromWorkspace detaches a workspace-scope attachment by
// compare-and-set. Existing run snapshots keep it; only later runs change.
func (s *Service) DetachFromWorkspace(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID, attachmentID string) (Attachment, error) {
	if err := p.Require(access.PermPolicyWrite); err != nil {
		return Attachment{}, err
	}
	a, err := attachmentByID(ctx, tx, p.OrganizationID, attachmentID)
	if err != nil || a.Scope != ScopeWorkspace || a.ScopeID != workspaceID {
		return Attachment{}, fault.ErrNotFound
	}
	return s.detach(ctx, tx, p, a)
}

// Detach detaches an attachment of a set at any scope, with the same
// checks as attaching there.
func (s *Service) Detach(ctx context.Context, tx *sqlx.Tx, p access.Principal, setID, attachmentID string) (Attachment, error) {
	if err := p.Require(access.PermPolicyWrite); err != nil {
		return Attachment{}, err
	}
	a, err := attachmentByID(ctx, tx, p.OrganizationID, attachmentID)
	if err != nil || a.PolicySetID != setID {
		return Attachment{}, fault.ErrNotFound
	}
	return s.detach(ctx, tx, p, a)
}

func (s *Service) detach(ctx context.Context, tx *sqlx.Tx, p access.Principal, a Attachment) (Attachment, error) {
	if err := s.requireScope(ctx, tx, p, a.Scope, a.ScopeID); err != nil {
		return Attachment{}, err
	}
	now := s.stamp()
	detached, err := detachAttachment(ctx, tx, a, now)
	if err != nil {
		return Attachment{}, err
	}
	if !detached {
		return Attachment{}, ErrAttachmentDetached
	}
	a.Status, a.DetachedAt = AttachmentDetached, &now
	return a, audit.Record(ctx, tx, p, "policy_attachment.detached", "policy_attachment", a.ID, map[string]any{
		"policy_set_id": a.PolicySetID, "scope": a.Scope, "scope_id": a.ScopeID,
	})
}

// WorkspaceAttachments lists the active attachments in force for a
// workspace (its organization's, its project's and its own), in
// evaluation order.
func (s *Service) WorkspaceAttachments(ctx context.Context, p access.Principal, workspaceID string) ([]EffectiveAttachment, error) {
	if err := p.Require(access.PermPolicyRead); err != nil {
		return nil, err
	}
	w, err := s.workspaces.GetWorkspace(ctx, p, workspaceID)
	if err != nil {
		return nil, err
	}
	return effectiveAttachments(ctx, s.db, w.OrganizationID, w.ProjectID, w.ID)
}

// Snapshot errors: an effective list that cannot be evaluated fails closed.
const (
	SnapshotSetAttachedTwice = "policy_set_attached_at_two_scopes"
	SnapshotOverLimit        = "policy_attachments_over_limit"
)

// SnapshotRun captures the workspace's effective attachment list for a new
// run in the creating transaction. A list that cannot be evaluated is not
// captured; its reason is returned for the run to record, and the run's
// policy stage then ends in error.
func (s *Service) SnapshotRun(ctx context.Context, tx *sqlx.Tx, organizationID, projectID, workspaceID, runID string) (string, error) {
	effective, err := effectiveAttachments(ctx, tx, organizationID, projectID, workspaceID)
	if err != nil {
		return "", err
	}
	if len(effective) > MaxAttachmentsPerRun {
		return SnapshotOverLimit, nil
	}
	seen := map[string]bool{}
	entries := make([]SnapshotEntry, 0, len(effective))
	for i, a := range effective {
		if seen[a.PolicySetID] {
			return SnapshotSetAttachedTwice, nil
		}
		seen[a.PolicySetID] = true
		entries = append(entries, SnapshotEntry{RunID: runID, Sequence: i + 1, AttachmentID: a.ID, PolicySetID: a.PolicySetID,
			PolicyVersionID: a.PolicyVersionID, Scope: a.Scope, EnforcementMode: a.EnforcementMode, BundleSHA256: a.BundleSHA256})
	}
	return "", insertSnapshot(ctx, tx, entries)
}
