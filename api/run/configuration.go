package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/archive"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/platform/blob"
	"github.com/cairnhq/cairn/api/platform/blobkey"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
)

// MaxArchiveBytes is the exact limit of a configuration archive (SPEC §8).
const MaxArchiveBytes = 100_000_000

// Configuration version statuses.
const (
	ConfigurationPending  = "pending"
	ConfigurationUploaded = "uploaded"
	ConfigurationErrored  = "errored"
	// ConfigurationArchived is an uploaded version whose archive was
	// deleted; its row stays for the runs that used it.
	ConfigurationArchived = "archived"
)

// ConfigurationVersion is one uploaded configuration archive.
type ConfigurationVersion struct {
	ID             string  `db:"id"`
	OrganizationID string  `db:"organization_id"`
	WorkspaceID    string  `db:"workspace_id"`
	Status         string  `db:"status"`
	Source         string  `db:"source"`
	Speculative    bool    `db:"speculative"`
	AutoQueueRuns  bool    `db:"auto_queue_runs"`
	ErrorCode      *string `db:"error_code"`
	BlobKey        *string `db:"blob_key"`
	SizeBytes      *int64  `db:"size_bytes"`
	SHA256         []byte  `db:"sha256"`
	LockFileSHA256 []byte  `db:"lock_file_sha256"`
	Entries        *int    `db:"entries"`
	ExpandedBytes  *int64  `db:"expanded_bytes"`
	CreatedByKind  string  `db:"created_by_kind"`
	CreatedByID    string  `db:"created_by_id"`
	// CreatedByAgent is the OAuth client of the agent that uploaded the
	// version: its code is untrusted in every run until a person
	// releases one.
	CreatedByAgent *string    `db:"created_by_agent"`
	CreatedAt      time.Time  `db:"created_at"`
	UploadedAt     *time.Time `db:"uploaded_at"`
	// Provisional versions do not become the workspace's current
	// configuration until a run uses them.
	Provisional bool `db:"provisional"`
	// CurrentSince is when the version became the workspace's current
	// configuration candidate (creation, or a provisional version's first
	// run); the newest one is current. Nil for an unused provisional one.
	CurrentSince *time.Time `db:"current_since"`
	ArchivedAt   *time.Time `db:"archived_at"`
}

// ConfigurationInput is how a configuration version is created.
type ConfigurationInput struct {
	Source        string
	Speculative   bool
	AutoQueueRuns bool
	Provisional   bool
}

// Sources of runs and configuration versions.
const (
	SourceAPI = "api"
	SourceTFE = "tfe"
)

// archiveIdentity binds a sealed archive to its configuration version.
func archiveIdentity(organizationID, cvID string) string {
	return "cairn/configuration-version/" + organizationID + "/" + cvID
}

// StagedArchive is a validated, sealed archive whose configuration version
// row is not written yet.
type StagedArchive struct {
	ID             string
	OrganizationID string
	Key            string
	Manifest       archive.Manifest
	Digests        blob.Digests
}

// StageArchive streams and validates an archive for a configuration
// version that does not exist yet, so that the row, its idempotency record
// and its audit evidence can be written in one transaction afterwards.
func (s *Service) StageArchive(ctx context.Context, organizationID string, r io.Reader) (StagedArchive, error) {
	blobs, err := s.storage()
	if err != nil {
		return StagedArchive{}, err
	}
	st := StagedArchive{ID: id.New("cfg"), OrganizationID: organizationID}
	st.Key = blobkey.Configuration(organizationID, st.ID)
	st.Manifest, st.Digests, err = s.storeArchive(ctx, blobs, st.Key, archiveIdentity(organizationID, st.ID), r)
	if err != nil {
		_ = blobs.Delete(context.WithoutCancel(ctx), st.Key)
		return StagedArchive{}, err
	}
	return st, nil
}

// DiscardStaged deletes a staged archive that no row will reference.
func (s *Service) DiscardStaged(ctx context.Context, st StagedArchive) {
	if s.blobs != nil && st.Key != "" {
		_ = s.blobs.Delete(context.WithoutCancel(ctx), st.Key)
	}
}

// CreateUploadedConfiguration writes the configuration version of a staged
// archive in the caller's transaction.
func (s *Service) CreateUploadedConfiguration(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID string, st StagedArchive) (ConfigurationVersion, error) {
	return s.CreateStagedConfiguration(ctx, tx, p, workspaceID, st, SourceAPI)
}

// CreateStagedConfiguration writes the configuration version of a staged
// archive from a source (an upload, or the code host) in the caller's
// transaction.
func (s *Service) CreateStagedConfiguration(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID string, st StagedArchive, source string) (ConfigurationVersion, error) {
	w, err := s.workspaces.WorkspaceForWrite(ctx, tx, p, workspaceID, access.PermRunCreate)
	if err != nil {
		return ConfigurationVersion{}, err
	}
	if w.OrganizationID != st.OrganizationID {
		return ConfigurationVersion{}, fault.ErrNotFound
	}
	now := s.stamp()
	entries, key := st.Manifest.Entries, st.Key
	cv := ConfigurationVersion{
		ID: st.ID, OrganizationID: w.OrganizationID, WorkspaceID: w.ID, Status: ConfigurationUploaded, Source: source,
		BlobKey: &key, SizeBytes: &st.Digests.Size, SHA256: st.Digests.SHA256, Entries: &entries,
		ExpandedBytes: &st.Manifest.ExpandedBytes, CreatedByKind: p.Kind, CreatedByID: p.ID, CreatedByAgent: agentOf(p),
		CreatedAt: now, UploadedAt: &now, CurrentSince: &now,
	}
	if st.Manifest.LockFileSHA256 != "" {
		cv.LockFileSHA256 = decodeHex(st.Manifest.LockFileSHA256)
	}
	if err := insertConfigurationVersion(ctx, tx, cv); err != nil {
		return ConfigurationVersion{}, err
	}
	return cv, audit.Record(ctx, tx, p, "configuration_version.uploaded", "configuration_version", cv.ID,
		map[string]any{"workspace_id": w.ID, "size_bytes": st.Digests.Size, "entries": entries, "source": source})
}

// ReadyToUpload checks, before any byte is read, that the principal may
// upload configuration to the workspace.
func (s *Service) ReadyToUpload(ctx context.Context, p access.Principal, workspaceID string) error {
	if _, err := s.storage(); err != nil {
		return err
	}
	if err := p.Require(access.PermRunCreate); err != nil {
		return err
	}
	_, err := s.workspaces.GetWorkspace(ctx, p, workspaceID)
	return err
}

// CreateConfigurationVersion creates a pending configuration version in a
// workspace the principal may create runs in.
func (s *Service) CreateConfigurationVersion(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID string, in ConfigurationInput) (ConfigurationVersion, error) {
	if _, err := s.storage(); err != nil {
		return ConfigurationVersion{}, err
	}
	w, err := s.workspaces.WorkspaceForWrite(ctx, tx, p, workspaceID, access.PermRunCreate)
	if err != nil {
		return ConfigurationVersion{}, err
	}
	now := s.stamp()
	cv := ConfigurationVersion{
		ID: id.New("cfg"), OrganizationID: w.OrganizationID, WorkspaceID: w.ID, Status: ConfigurationPending,
		Source: in.Source, Speculative: in.Speculative, AutoQueueRuns: in.AutoQueueRuns, Provisional: in.Provisional,
		CreatedByKind: p.Kind, CreatedByID: p.ID, CreatedByAgent: agentOf(p), CreatedAt: now,
	}
	if !in.Provisional {
		cv.CurrentSince = &now
	}
	if err := insertConfigurationVersion(ctx, tx, cv); err != nil {
		return ConfigurationVersion{}, err
	}
	return cv, audit.Record(ctx, tx, p, "configuration_version.created", "configuration_version", cv.ID,
		map[string]any{"workspace_id": w.ID, "source": in.Source, "speculative": in.Speculative, "provisional": in.Provisional})
}

// ListConfigurationVersions reads a numbered page of a workspace's
// configuration versions, newest first, with the total.
func (s *Service) ListConfigurationVersions(ctx context.Context, p access.Principal, workspaceID string, number, size int) ([]ConfigurationVersion, int, error) {
	if err := p.Require(access.PermRunRead); err != nil {
		return nil, 0, err
	}
	w, err := s.workspaces.GetWorkspace(ctx, p, workspaceID)
	if err != nil {
		return nil, 0, err
	}
	return listConfigurationVersions(ctx, s.db, w.OrganizationID, w.ID, number, size)
}

// CurrentConfiguration is the workspace's current configuration version,
// or nil: the newest that is not provisional or that a run used.
func (s *Service) CurrentConfiguration(ctx context.Context, organizationID, workspaceID string) (*ConfigurationVersion, error) {
	return currentConfiguration(ctx, s.db, organizationID, workspaceID)
}

// ArchiveConfigurationVersion deletes the archive of an uploaded version
// that is not the workspace's current one and that no unfinished run
// uses, keeping its row. It returns the object key, which the caller
// deletes once the transaction committed.
func (s *Service) ArchiveConfigurationVersion(ctx context.Context, tx *sqlx.Tx, p access.Principal, cvID string) (ConfigurationVersion, string, error) {
	cv, err := configurationVersionByID(ctx, tx, p.OrganizationID, cvID)
	if err != nil {
		return ConfigurationVersion{}, "", err
	}
	w, err := s.workspaces.WorkspaceForWrite(ctx, tx, p, cv.WorkspaceID, access.PermRunCreate)
	if err != nil {
		return ConfigurationVersion{}, "", err
	}
	if cv.Status != ConfigurationUploaded {
		return ConfigurationVersion{}, "", ErrConfigurationNotArchivable
	}
	current, err := currentConfiguration(ctx, tx, w.OrganizationID, w.ID)
	if err != nil {
		return ConfigurationVersion{}, "", err
	}
	if current != nil && current.ID == cv.ID {
		return ConfigurationVersion{}, "", ErrConfigurationCurrent
	}
	var inUse bool
	if err := tx.GetContext(ctx, &inUse, `SELECT EXISTS (SELECT 1 FROM runs WHERE configuration_version_id = $1
		AND status NOT IN (`+terminalList()+`))`, cv.ID); err != nil {
		return ConfigurationVersion{}, "", fmt.Errorf("checking runs of configuration version: %w", err)
	}
	if inUse {
		return ConfigurationVersion{}, "", ErrConfigurationNotArchivable
	}
	key := *cv.BlobKey
	now := s.stamp()
	cv.Status, cv.BlobKey, cv.ArchivedAt = ConfigurationArchived, nil, &now
	if _, err := tx.ExecContext(ctx, `UPDATE configuration_versions SET status = 'archived', blob_key = NULL, archived_at = $2
		WHERE id = $1 AND status = 'uploaded'`, cv.ID, now); err != nil {
		return ConfigurationVersion{}, "", fmt.Errorf("archiving configuration version: %w", err)
	}
	return cv, key, audit.Record(ctx, tx, p, "configuration_version.archived", "configuration_version", cv.ID,
		map[string]any{"workspace_id": w.ID})
}

// DeleteArchiveObject removes an archived version's object after its
// reference is gone; a failure leaves an orphan for the sweep.
func (s *Service) DeleteArchiveObject(ctx context.Context, key string) {
	if s.blobs != nil && key != "" {
		_ = s.blobs.Delete(context.WithoutCancel(ctx), key)
	}
}

// DownloadConfiguration opens the archive of an uploaded version. An
// archive is the workspace's source code, so reading it takes what
// uploading one does (run:create).
func (s *Service) DownloadConfiguration(ctx context.Context, p access.Principal, cvID string) (io.ReadCloser, ConfigurationVersion, error) {
	if err := p.Require(access.PermRunCreate); err != nil {
		return nil, ConfigurationVersion{}, err
	}
	cv, err := s.GetConfigurationVersion(ctx, p, cvID)
	if err != nil {
		return nil, ConfigurationVersion{}, err
	}
	if cv.Status != ConfigurationUploaded {
		return nil, ConfigurationVersion{}, fault.ErrNotFound
	}
	rc, err := s.OpenArchive(ctx, cv)
	return rc, cv, err
}

// GetConfigurationVersion reads a configuration version the principal may see.
func (s *Service) GetConfigurationVersion(ctx context.Context, p access.Principal, cvID string) (ConfigurationVersion, error) {
	cv, err := configurationVersionByID(ctx, s.db, p.OrganizationID, cvID)
	if err != nil {
		return ConfigurationVersion{}, err
	}
	if _, err := s.workspaces.GetWorkspace(ctx, p, cv.WorkspaceID); err != nil {
		return ConfigurationVersion{}, err
	}
	return cv, nil
}

// ConfigurationOwner returns a configuration version by ID alone, for
// admission of capability uploads before any byte is read.
func (s *Service) ConfigurationOwner(ctx context.Context, cvID string) (ConfigurationVersion, error) {
	return configurationVersionByID(ctx, s.db, "", cvID)
}

// UploadConfiguration streams an archive into sealed storage while
// validating it, and finishes the pending version: uploaded with its
// digests, or errored with the archive's safe code. The archive is never
// held in memory; the first invalid entry stops the stream.
func (s *Service) UploadConfiguration(ctx context.Context, cvID string, r io.Reader) (ConfigurationVersion, error) {
	blobs, err := s.storage()
	if err != nil {
		return ConfigurationVersion{}, err
	}
	cv, err := configurationVersionByID(ctx, s.db, "", cvID)
	if err != nil {
		return ConfigurationVersion{}, err
	}
	if cv.Status != ConfigurationPending {
		return ConfigurationVersion{}, ErrConfigurationUploaded
	}
	key := blobkey.Configuration(cv.OrganizationID, cv.ID)
	manifest, digests, err := s.storeArchive(ctx, blobs, key, archiveIdentity(cv.OrganizationID, cv.ID), r)
	var archiveErr ArchiveError
	switch {
	case errors.As(err, &archiveErr):
		_ = blobs.Delete(context.WithoutCancel(ctx), key)
		code := archiveErr.Code
		cv.Status, cv.ErrorCode = ConfigurationErrored, &code
		if werr := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error { return finishConfigurationVersion(ctx, tx, cv) }); werr != nil {
			return ConfigurationVersion{}, werr
		}
		return cv, err
	case err != nil:
		_ = blobs.Delete(context.WithoutCancel(ctx), key)
		return ConfigurationVersion{}, err
	}
	now := s.stamp()
	entries := manifest.Entries
	cv.Status, cv.BlobKey, cv.SizeBytes, cv.SHA256 = ConfigurationUploaded, &key, &digests.Size, digests.SHA256
	cv.Entries, cv.ExpandedBytes, cv.UploadedAt = &entries, &manifest.ExpandedBytes, &now
	if manifest.LockFileSHA256 != "" {
		cv.LockFileSHA256 = decodeHex(manifest.LockFileSHA256)
	}
	err = db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		if err := finishConfigurationVersion(ctx, tx, cv); err != nil {
			return err
		}
		_, err := audit.Append(ctx, tx, audit.Entry{
			OrganizationID: cv.OrganizationID, Action: "configuration_version.uploaded",
			Actor:      audit.Actor{Type: cv.CreatedByKind, ID: cv.CreatedByID},
			TargetType: "configuration_version", TargetID: cv.ID,
			Evidence: map[string]any{"size_bytes": digests.Size, "entries": entries},
		})
		return err
	})
	if err != nil {
		_ = blobs.Delete(context.WithoutCancel(ctx), key)
		return ConfigurationVersion{}, err
	}
	return cv, nil
}

// storeArchive seals and validates an archive in one pass and maps the
// archive package's refusals to the codes clients see.
func (s *Service) storeArchive(ctx context.Context, blobs *blob.Store, key, identity string, r io.Reader) (archive.Manifest, blob.Digests, error) {
	manifest, digests, err := archive.Store(ctx, blobs, key, identity, r, MaxArchiveBytes)
	if code := archive.CodeOf(err); code != "" {
		return archive.Manifest{}, blob.Digests{}, ArchiveError{Code: code}
	}
	return manifest, digests, err
}

// OpenArchive returns the plaintext archive of an uploaded version.
func (s *Service) OpenArchive(ctx context.Context, cv ConfigurationVersion) (io.ReadCloser, error) {
	blobs, err := s.storage()
	if err != nil {
		return nil, err
	}
	if cv.Status != ConfigurationUploaded || cv.BlobKey == nil {
		return nil, ErrConfigurationNotReady
	}
	return blobs.Open(ctx, *cv.BlobKey, archiveIdentity(cv.OrganizationID, cv.ID))
}

func (s *Service) storage() (*blob.Store, error) {
	if s.blobs == nil {
		return nil, fmt.Errorf("artifact storage needs CAIRN_MASTER_KEY: %w", fault.ErrUnavailable)
	}
	return s.blobs, nil
}

// agentOf is the OAuth client of the agent acting for p, or nil.
func agentOf(p access.Principal) *string {
	if p.Agent == nil {
		return nil
	}
	return &p.Agent.ClientID
}
