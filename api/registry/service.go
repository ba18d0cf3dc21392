package registry

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
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

// Options configures the service.
type Options struct {
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Logger is slog.Default() when nil.
	Logger *slog.Logger
	// CursorKey keys list cursors (at least 32 bytes); a random key when
	// nil, which keeps cursors valid only within this process.
	CursorKey []byte
}

// Service is the private module registry.
type Service struct {
	db      *sqlx.DB
	blobs   *blob.Store
	now     func() time.Time
	logger  *slog.Logger
	cursors pageCursors
}

// NewService returns the registry. Without blobs (no master key) modules
// can be listed but no archive can be stored or read.
func NewService(conn *sqlx.DB, blobs *blob.Store, opts Options) *Service {
	s := &Service{db: conn, blobs: blobs, now: opts.Now, logger: opts.Logger, cursors: pageCursors{key: opts.CursorKey}}
	if s.now == nil {
		s.now = time.Now
	}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	if len(s.cursors.key) == 0 {
		s.cursors.key = make([]byte, 32)
		_, _ = rand.Read(s.cursors.key)
	}
	return s
}

func (s *Service) stamp() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// registryActor is who records what no principal did directly: an
// archive's verdict, reached after the upload that carried it.
var registryActor = audit.Actor{Type: audit.ActorSystem, ID: "registry"}

// CreateModule creates a module with no version.
func (s *Service) CreateModule(ctx context.Context, p access.Principal, in CreateModuleInput) (Module, error) {
	return inTx(ctx, s, func(tx *sqlx.Tx) (Module, error) { return s.CreateModuleTx(ctx, tx, p, in) })
}

// inTx runs fn in a transaction of its own.
func inTx[T any](ctx context.Context, s *Service, fn func(tx *sqlx.Tx) (T, error)) (T, error) {
	var out T
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var err error
		out, err = fn(tx)
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}

// CreateModuleTx is CreateModule in the caller's transaction.
func (s *Service) CreateModuleTx(ctx context.Context, tx *sqlx.Tx, p access.Principal, in CreateModuleInput) (Module, error) {
	if err := p.Require(access.PermRegistryWrite); err != nil {
		return Module{}, err
	}
	if in.RegistryName == "" {
		in.RegistryName = RegistryPrivate
	}
	if in.RegistryName != RegistryPrivate && in.RegistryName != RegistryPublic {
		return Module{}, fmt.Errorf("%w: registry name must be private or public", ErrInvalid)
	}
	if err := ValidateName(in.Name); err != nil {
		return Module{}, err
	}
	if err := ValidateProvider(in.Provider); err != nil {
		return Module{}, err
	}
	if err := validateSource(in.Source); err != nil {
		return Module{}, err
	}
	orgName, err := organizationName(ctx, tx, p.OrganizationID)
	if err != nil {
		return Module{}, err
	}
	namespace, err := namespaceOf(in.RegistryName, in.Namespace, orgName)
	if err != nil {
		return Module{}, err
	}
	now := s.stamp()
	m := Module{ID: id.New("mod"), OrganizationID: p.OrganizationID, OrganizationName: orgName,
		RegistryName: in.RegistryName, Namespace: namespace, Name: in.Name, Provider: in.Provider,
		Status: ModulePending, Source: in.Source, CreatedAt: now, UpdatedAt: now}
	if err := insertModule(ctx, tx, m, p.ID); err != nil {
		return Module{}, err
	}
	evidence := map[string]any{"registry_name": m.RegistryName, "namespace": m.Namespace, "name": m.Name, "provider": m.Provider}
	if m.Source != nil {
		evidence["repository"] = m.Source.Owner + "/" + m.Source.Repository
		evidence["directory"], evidence["tag_prefix"] = m.Source.Directory, m.Source.TagPrefix
	}
	return m, audit.Record(ctx, tx, p, "registry_module.created", "registry_module", m.ID, evidence)
}

// namespaceOf is a new module's namespace: the organization's name in the
// private registry (the only one it may name), an explicit one in the
// public registry.
func namespaceOf(registryName, namespace, orgName string) (string, error) {
	if registryName == RegistryPrivate {
		if namespace != "" && namespace != orgName {
			return "", fmt.Errorf("%w: the namespace of a private module is its organization's name", ErrInvalid)
		}
		return orgName, nil
	}
	if !namePattern.MatchString(namespace) {
		return "", fmt.Errorf("%w: a public module needs a namespace of letters, digits, '-' and '_'", ErrInvalid)
	}
	return namespace, nil
}

// validateSource checks a binding's shape; that the repository belongs to
// the organization's installation is the caller's to check.
func validateSource(src *Source) error {
	if src == nil {
		return nil
	}
	if src.InstallationID <= 0 || src.RepositoryID <= 0 || src.Owner == "" || src.Repository == "" {
		return fmt.Errorf("%w: source needs an installation, a repository and its owner", ErrInvalid)
	}
	if len(src.Directory) > 1024 || len(src.TagPrefix) > 100 {
		return fmt.Errorf("%w: source directory is at most 1024 bytes and tag prefix at most 100", ErrInvalid)
	}
	return nil
}

// Module reads one module of the principal's organization.
func (s *Service) Module(ctx context.Context, p access.Principal, moduleID string) (Module, error) {
	if err := p.Require(access.PermRegistryRead); err != nil {
		return Module{}, err
	}
	return moduleByID(ctx, s.db, p.OrganizationID, moduleID)
}

// ModuleByAddress reads a module of the principal's organization by its
// address.
func (s *Service) ModuleByAddress(ctx context.Context, p access.Principal, registryName, namespace, name, provider string) (Module, error) {
	if err := p.Require(access.PermRegistryRead); err != nil {
		return Module{}, err
	}
	return moduleByAddress(ctx, s.db, p.OrganizationID, registryName, namespace, name, provider)
}

// ListModules reads one page of the organization's modules by name, then
// provider; it returns the next page's cursor, "" after the last page.
func (s *Service) ListModules(ctx context.Context, p access.Principal, q ListModulesQuery) ([]Module, string, error) {
	if err := p.Require(access.PermRegistryRead); err != nil {
		return nil, "", err
	}
	if len(q.Query) > 64 {
		return nil, "", fmt.Errorf("%w: q is at most 64 bytes", ErrInvalid)
	}
	f := moduleListFilter{query: q.Query, provider: q.Provider, registryName: q.RegistryName}
	after, err := s.cursors.decode("modules", f.canonical(), q.Cursor, 3)
	if err != nil {
		return nil, "", err
	}
	limit := pageLimit(q.Limit)
	rows, err := listModules(ctx, s.db, p.OrganizationID, f, after, limit)
	if err != nil || len(rows) <= limit {
		return rows, "", err
	}
	rows = rows[:limit]
	last := rows[limit-1]
	return rows, s.cursors.encode("modules", f.canonical(), []string{last.Name, last.Provider, last.ID}), nil
}

// DeleteModule deletes a module and its versions; their archives are
// deleted once that has committed.
func (s *Service) DeleteModule(ctx context.Context, p access.Principal, moduleID string) error {
	return s.deleteThenRelease(ctx, func(tx *sqlx.Tx) ([]string, error) { return s.DeleteModuleTx(ctx, tx, p, moduleID) })
}

// deleteThenRelease runs a deletion in a transaction of its own and, once
// it has committed, deletes the archives it released.
func (s *Service) deleteThenRelease(ctx context.Context, del func(tx *sqlx.Tx) ([]string, error)) error {
	keys, err := inTx(ctx, s, del)
	if err != nil {
		return err
	}
	s.DeleteArchives(ctx, keys)
	return nil
}

// DeleteModuleTx is DeleteModule in the caller's transaction. It returns
// the keys of the archives the caller deletes (DeleteArchives) once it
// has committed.
func (s *Service) DeleteModuleTx(ctx context.Context, tx *sqlx.Tx, p access.Principal, moduleID string) ([]string, error) {
	if err := p.Require(access.PermRegistryWrite); err != nil {
		return nil, err
	}
	m, err := moduleByID(ctx, tx, p.OrganizationID, moduleID)
	if err != nil {
		return nil, err
	}
	return s.deleteModule(ctx, tx, p, m)
}

// DeleteModulesByName deletes every provider of a module name, or the one
// provider given (HCP's delete by name and by provider).
func (s *Service) DeleteModulesByName(ctx context.Context, p access.Principal, registryName, namespace, name string, provider *string) error {
	if err := p.Require(access.PermRegistryWrite); err != nil {
		return err
	}
	return s.deleteThenRelease(ctx, func(tx *sqlx.Tx) ([]string, error) {
		mods, err := modulesByName(ctx, tx, p.OrganizationID, registryName, namespace, name, provider)
		if err != nil {
			return nil, err
		}
		if len(mods) == 0 {
			return nil, fault.ErrNotFound
		}
		var keys []string
		for _, m := range mods {
			deleted, err := s.deleteModule(ctx, tx, p, m)
			if err != nil {
				return nil, err
			}
			keys = append(keys, deleted...)
		}
		return keys, nil
	})
}

func (s *Service) deleteModule(ctx context.Context, tx *sqlx.Tx, p access.Principal, m Module) ([]string, error) {
	if err := lockModule(ctx, tx, p.OrganizationID, m.ID); err != nil {
		return nil, err
	}
	keys, err := deleteModuleRow(ctx, tx, p.OrganizationID, m.ID)
	if err != nil {
		return nil, err
	}
	return keys, audit.Record(ctx, tx, p, "registry_module.deleted", "registry_module", m.ID, map[string]any{
		"registry_name": m.RegistryName, "namespace": m.Namespace, "name": m.Name, "provider": m.Provider,
		"version_count": m.VersionCount})
}

// DeleteArchives removes archives whose rows are already gone, best
// effort: what fails stays for the orphan sweep.
func (s *Service) DeleteArchives(ctx context.Context, keys []string) {
	if s.blobs == nil {
		return
	}
	for _, k := range keys {
		if err := s.blobs.Delete(context.WithoutCancel(ctx), k); err != nil {
			s.logger.WarnContext(ctx, "registry archive left for the sweep", "error", err)
		}
	}
}

// CreateVersion adds a pending version to a module; its archive comes
// with PublishArchive. A version string the module has is ErrVersionExists.
func (s *Service) CreateVersion(ctx context.Context, p access.Principal, moduleID, version string, origin VersionOrigin) (Version, error) {
	return inTx(ctx, s, func(tx *sqlx.Tx) (Version, error) {
		return s.createVersion(ctx, tx, p, moduleID, version, origin, nil)
	})
}

// createVersion inserts a version under the module's lock: pending, or
// with a staged upload's verdict already recorded.
func (s *Service) createVersion(ctx context.Context, tx *sqlx.Tx, p access.Principal, moduleID, version string, origin VersionOrigin, staged *StagedUpload) (Version, error) {
	if err := p.Require(access.PermRegistryWrite); err != nil {
		return Version{}, err
	}
	sv, err := ParseSemver(version)
	if err != nil {
		return Version{}, err
	}
	v := Version{ID: id.New("modv"), ModuleID: moduleID, OrganizationID: p.OrganizationID, Version: sv.Original,
		Status: VersionPending, Origin: OriginUpload}
	if staged != nil {
		if staged.moduleID != moduleID || staged.organizationID != p.OrganizationID {
			return Version{}, fault.ErrNotFound
		}
		v.ID = staged.versionID
	}
	switch origin.Kind {
	case "", OriginUpload:
	case OriginTag:
		if origin.Tag == "" || len(origin.Tag) > 255 || !isCommitSHA(origin.CommitSHA) {
			return Version{}, fmt.Errorf("%w: a tag version needs its tag and commit", ErrInvalid)
		}
		tag, commit := origin.Tag, origin.CommitSHA
		v.Origin, v.Tag, v.CommitSHA = OriginTag, &tag, &commit
	default:
		return Version{}, fmt.Errorf("%w: unknown version origin %q", ErrInvalid, origin.Kind)
	}
	if err := lockModule(ctx, tx, p.OrganizationID, moduleID); err != nil {
		return Version{}, err
	}
	v.CreatedAt = s.stamp()
	if err := insertVersion(ctx, tx, v, sv.Key(), p.ID); err != nil {
		return Version{}, err
	}
	evidence := map[string]any{"module_id": moduleID, "version": v.Version, "origin": v.Origin}
	if v.Tag != nil {
		evidence["tag"], evidence["commit_sha"] = *v.Tag, *v.CommitSHA
	}
	if err := audit.Record(ctx, tx, p, "registry_module_version.created", "registry_module_version", v.ID, evidence); err != nil {
		return Version{}, err
	}
	if staged == nil {
		return v, nil
	}
	if err := s.settle(ctx, tx, v, staged.verdict, audit.ActorOf(p)); err != nil {
		return Version{}, err
	}
	row, err := versionByID(ctx, tx, p.OrganizationID, v.ID, false)
	return row.version(), err
}

// StagedUpload is an upload stored and checked before its version exists,
// so that the version, its verdict and the caller's own records commit in
// one transaction (PublishStagedTx).
type StagedUpload struct {
	organizationID, moduleID, versionID string
	verdict                             publishedArchive
}

// StageUpload stores and checks an archive for a new version of a module
// the principal may publish to. The caller publishes it with
// PublishStagedTx, or discards it (DiscardStaged) when that fails.
func (s *Service) StageUpload(ctx context.Context, p access.Principal, moduleID string, r io.Reader) (StagedUpload, error) {
	if err := p.Require(access.PermRegistryWrite); err != nil {
		return StagedUpload{}, err
	}
	if _, err := moduleByID(ctx, s.db, p.OrganizationID, moduleID); err != nil {
		return StagedUpload{}, err
	}
	if s.blobs == nil {
		return StagedUpload{}, ErrStorageUnavailable
	}
	st := StagedUpload{organizationID: p.OrganizationID, moduleID: moduleID, versionID: id.New("modv")}
	key := blobkey.RegistryModuleVersion(st.organizationID, moduleID, st.versionID)
	verdict, err := s.inspectUpload(ctx, key, archiveIdentity(st.organizationID, st.versionID), r)
	if err != nil {
		return StagedUpload{}, err
	}
	st.verdict = verdict
	return st, nil
}

// SHA256 is the staged archive's hex digest, "" when it was refused
// before it was read whole.
func (st StagedUpload) SHA256() string { return st.verdict.SHA256 }

// DiscardStaged deletes a staged upload's archive; no row references it.
func (s *Service) DiscardStaged(ctx context.Context, st StagedUpload) {
	if st.verdict.BlobKey != "" {
		s.DeleteArchives(ctx, []string{st.verdict.BlobKey})
	}
}

// PublishStagedTx creates a version of a staged upload in the caller's
// transaction, ok or errored as the archive was found. An errored one's
// archive is the caller's to discard after the commit (a published one's
// is kept).
func (s *Service) PublishStagedTx(ctx context.Context, tx *sqlx.Tx, p access.Principal, moduleID, version string, st StagedUpload) (Version, error) {
	return s.createVersion(ctx, tx, p, moduleID, version, VersionOrigin{}, &st)
}

// settle records a verdict on a pending version, with the module's new
// status and the audit event, in tx.
func (s *Service) settle(ctx context.Context, tx *sqlx.Tx, v Version, verdict publishedArchive, actor audit.Actor) error {
	now := s.stamp()
	if err := recordArchive(ctx, tx, v.ID, verdict, now); err != nil {
		return err
	}
	if err := refreshModuleStatus(ctx, tx, v.ModuleID, now); err != nil {
		return err
	}
	action, evidence := "registry_module_version.published", map[string]any{
		"module_id": v.ModuleID, "version": v.Version, "archive_sha256": verdict.SHA256, "archive_bytes": verdict.Bytes}
	if verdict.ErrorCode != "" {
		action, evidence = "registry_module_version.errored", map[string]any{
			"module_id": v.ModuleID, "version": v.Version, "error_code": verdict.ErrorCode}
	}
	_, err := audit.Append(ctx, tx, audit.Entry{OrganizationID: v.OrganizationID, Action: action, Actor: actor,
		TargetType: "registry_module_version", TargetID: v.ID, Evidence: evidence})
	return err
}

func isCommitSHA(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && s == lowerHex(s)
}

func lowerHex(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'F' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// archiveIdentity binds a sealed archive to its version.
func archiveIdentity(organizationID, versionID string) string {
	return "cairn/registry-module-version/" + organizationID + "/" + versionID
}

// PublishArchive takes a pending version's archive from r: it is
// validated and sealed as it streams, then unpacked into a temporary
// directory to read its facts. The version ends ok, or errored with a
// safe code and message when the archive breaks the rules. Callers
// authorize (an upload capability, the ingestion job). A version that
// already took an archive answers a repeat of the same bytes as it did the
// first time, and anything else with ErrVersionNotPending.
func (s *Service) PublishArchive(ctx context.Context, versionID string, r io.Reader) (Version, error) {
	row, err := versionByID(ctx, s.db, "", versionID, false)
	if err != nil {
		return Version{}, err
	}
	if row.Status != VersionPending {
		return s.repeatedUpload(row, r)
	}
	if s.blobs == nil {
		return Version{}, ErrStorageUnavailable
	}
	key := blobkey.RegistryModuleVersion(row.OrganizationID, row.ModuleID, row.ID)
	identity := archiveIdentity(row.OrganizationID, row.ID)
	verdict, err := s.inspectUpload(ctx, key, identity, r)
	if err != nil {
		return Version{}, err
	}
	var v Version
	var keep bool
	err = db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		locked, err := versionByID(ctx, tx, "", versionID, true)
		if err != nil {
			return err
		}
		if locked.Status != VersionPending {
			// A concurrent upload got there first.
			v, err = sameUpload(locked, verdict.SHA256)
			return err
		}
		if err := s.settle(ctx, tx, locked.version(), verdict, registryActor); err != nil {
			return err
		}
		keep = verdict.ErrorCode == ""
		reread, err := versionByID(ctx, tx, "", versionID, false)
		v = reread.version()
		return err
	})
	if !keep && verdict.BlobKey != "" {
		s.DeleteArchives(ctx, []string{verdict.BlobKey})
	}
	if err != nil {
		return Version{}, err
	}
	return v, nil
}

// inspectUpload stores and checks an upload. An archive that breaks the
// rules is a verdict (an error code), not an error; the stored object is
// named in the verdict until the caller keeps or deletes it.
func (s *Service) inspectUpload(ctx context.Context, key, identity string, r io.Reader) (publishedArchive, error) {
	_, digests, err := archive.Store(ctx, s.blobs, key, identity, r, MaxArchiveBytes)
	if err != nil {
		// A small archive can be stored whole before the validator
		// refuses it, so a refusal may leave an object too.
		s.DeleteArchives(ctx, []string{key})
	}
	if code := archive.CodeOf(err); code != "" {
		return publishedArchive{ErrorCode: code, Message: archiveMessage(err)}, nil
	}
	if err != nil {
		return publishedArchive{}, fmt.Errorf("storing module archive: %w", err)
	}
	verdict := publishedArchive{BlobKey: key, SHA256: hex.EncodeToString(digests.SHA256), Bytes: digests.Size}
	facts, err := s.factsOf(ctx, key, identity, digests)
	var refused *factsError
	switch {
	case errors.As(err, &refused):
		verdict.ErrorCode, verdict.Message = refused.code, refused.message
	case err != nil:
		s.DeleteArchives(ctx, []string{key})
		return publishedArchive{}, err
	default:
		verdict.Facts = &facts
	}
	return verdict, nil
}

// factsOf unpacks a sealed archive into a temporary directory and reads
// its facts.
func (s *Service) factsOf(ctx context.Context, key, identity string, digests blob.Digests) (Facts, error) {
	dir, err := os.MkdirTemp("", "cairn-module-")
	if err != nil {
		return Facts{}, fmt.Errorf("creating module directory: %w", err)
	}
	defer os.RemoveAll(dir)
	sealed, err := s.blobs.Open(ctx, key, identity)
	if err != nil {
		return Facts{}, fmt.Errorf("opening module archive: %w", err)
	}
	verified := blob.Verified(sealed, digests.Size, digests.SHA256)
	defer verified.Close()
	if _, err := archive.Extract(ctx, verified, dir, archive.DefaultLimits()); err != nil {
		return Facts{}, fmt.Errorf("unpacking module archive: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Facts{}, fmt.Errorf("opening module directory: %w", err)
	}
	defer root.Close()
	return readFacts(root)
}

// archiveMessages are the safe words for each archive code.
var archiveMessages = map[string]string{
	"archive_too_large":        "the archive is larger than 100,000,000 bytes",
	"archive_malformed":        "the archive is not a gzip-compressed tar archive",
	"archive_checksum_invalid": "an entry header of the archive is corrupt",
	"archive_path_traversal":   "an entry's path leaves the archive's root",
	"archive_absolute_path":    "an entry's path is absolute",
	"archive_path_invalid":     "an entry's path is not allowed",
	"archive_path_too_long":    "an entry's path is too long",
	"archive_duplicate_path":   "two entries have the same path",
	"archive_link":             "the archive holds a symbolic or hard link",
	"archive_entry_type":       "the archive holds an entry that is neither a file nor a directory",
	"archive_expansion":        "the archive expands beyond its limit",
	"archive_too_many_entries": "the archive has too many entries",
	"archive_empty":            "the archive is empty",
}

// archiveMessage words an archive refusal, naming the offending entry
// quoted and clipped (its name is the uploader's).
func archiveMessage(err error) string {
	ae, _ := errors.AsType[*archive.Error](err)
	msg, ok := archiveMessages[ae.Code]
	if !ok {
		msg = "the archive breaks the archive rules"
	}
	if ae.Path != "" {
		msg += ": " + strconv.QuoteToASCII(clip(ae.Path, 200))
	}
	return clip(msg, 500)
}

// repeatedUpload answers an upload to a version that already took its
// archive: the same bytes (go-tfe's client uploads twice) get the answer
// the first upload got; anything else is refused.
func (s *Service) repeatedUpload(row versionRow, r io.Reader) (Version, error) {
	if row.ArchiveSHA256 == nil {
		return Version{}, ErrVersionNotPending
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(r, MaxArchiveBytes+1))
	if err != nil {
		return Version{}, fmt.Errorf("reading module archive: %w", err)
	}
	if row.ArchiveBytes == nil || n != *row.ArchiveBytes {
		return Version{}, ErrVersionNotPending
	}
	return sameUpload(row, hex.EncodeToString(h.Sum(nil)))
}

func sameUpload(row versionRow, sha string) (Version, error) {
	if row.ArchiveSHA256 == nil || sha == "" || *row.ArchiveSHA256 != sha {
		return Version{}, ErrVersionNotPending
	}
	return row.version(), nil
}

// Version reads one version of the principal's organization.
func (s *Service) Version(ctx context.Context, p access.Principal, versionID string) (Version, error) {
	if err := p.Require(access.PermRegistryRead); err != nil {
		return Version{}, err
	}
	row, err := versionByID(ctx, s.db, p.OrganizationID, versionID, false)
	if err != nil {
		return Version{}, err
	}
	return row.version(), nil
}

// VersionByString reads a module's version by its exact string.
func (s *Service) VersionByString(ctx context.Context, p access.Principal, moduleID, version string) (Version, error) {
	if err := p.Require(access.PermRegistryRead); err != nil {
		return Version{}, err
	}
	return versionByString(ctx, s.db, p.OrganizationID, moduleID, version)
}

// ListVersions reads one page of a module's versions, newest (semver)
// first, revoked and errored ones included.
func (s *Service) ListVersions(ctx context.Context, p access.Principal, moduleID string, q ListVersionsQuery) ([]Version, string, error) {
	if err := p.Require(access.PermRegistryRead); err != nil {
		return nil, "", err
	}
	if _, err := moduleByID(ctx, s.db, p.OrganizationID, moduleID); err != nil {
		return nil, "", err
	}
	after, err := s.cursors.decode("versions", moduleID, q.Cursor, 2)
	if err != nil {
		return nil, "", err
	}
	var afterKey []byte
	var afterVersion string
	if after != nil {
		if afterKey, err = hex.DecodeString(after[0]); err != nil {
			return nil, "", ErrInvalidCursor
		}
		afterVersion = after[1]
	}
	limit := pageLimit(q.Limit)
	rows, err := listVersions(ctx, s.db, moduleID, afterKey, afterVersion, limit, false)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		next = s.cursors.encode("versions", moduleID, []string{hex.EncodeToString(last.SortKey), last.Version})
	}
	out := make([]Version, len(rows))
	for i, r := range rows {
		out[i] = r.version()
	}
	return out, next, nil
}

// ResolvableVersions is what a CLI may resolve for a private module of
// the principal's organization: its ok, unrevoked versions, newest first.
// The namespace is the organization's name; any other is not found.
func (s *Service) ResolvableVersions(ctx context.Context, p access.Principal, namespace, name, provider string) ([]Version, error) {
	if err := p.Require(access.PermRegistryRead); err != nil {
		return nil, err
	}
	m, err := moduleByAddress(ctx, s.db, p.OrganizationID, RegistryPrivate, namespace, name, provider)
	if err != nil {
		return nil, err
	}
	rows, err := listVersions(ctx, s.db, m.ID, nil, "", 0, true)
	if err != nil {
		return nil, err
	}
	out := make([]Version, len(rows))
	for i, r := range rows {
		out[i] = r.version()
	}
	return out, nil
}

// Facts reads what a published version's archive says about the module.
func (s *Service) Facts(ctx context.Context, p access.Principal, versionID string) (Facts, error) {
	if err := p.Require(access.PermRegistryRead); err != nil {
		return Facts{}, err
	}
	if _, err := versionByID(ctx, s.db, p.OrganizationID, versionID, false); err != nil {
		return Facts{}, err
	}
	return versionFacts(ctx, s.db, versionID)
}

// Deprecate marks a published version deprecated, or replaces the reason
// and link of a deprecated one.
func (s *Service) Deprecate(ctx context.Context, p access.Principal, versionID, reason, link string) (Version, error) {
	return inTx(ctx, s, func(tx *sqlx.Tx) (Version, error) { return s.DeprecateTx(ctx, tx, p, versionID, reason, link) })
}

// DeprecateTx is Deprecate in the caller's transaction.
func (s *Service) DeprecateTx(ctx context.Context, tx *sqlx.Tx, p access.Principal, versionID, reason, link string) (Version, error) {
	if err := validateDeprecation(reason, link); err != nil {
		return Version{}, err
	}
	return s.changeFlags(ctx, tx, p, versionID, "registry_module_version.deprecated", func(v Version) (map[string]any, error) {
		if err := CanDeprecate(v); err != nil {
			return nil, err
		}
		return map[string]any{"reason": reason, "link": link},
			setDeprecation(ctx, tx, v.ID, &Deprecation{Reason: reason, Link: link, At: s.stamp(), By: p.ID})
	})
}

// Restore clears a version's deprecation.
func (s *Service) Restore(ctx context.Context, p access.Principal, versionID string) (Version, error) {
	return inTx(ctx, s, func(tx *sqlx.Tx) (Version, error) { return s.RestoreTx(ctx, tx, p, versionID) })
}

// RestoreTx is Restore in the caller's transaction.
func (s *Service) RestoreTx(ctx context.Context, tx *sqlx.Tx, p access.Principal, versionID string) (Version, error) {
	return s.changeFlags(ctx, tx, p, versionID, "registry_module_version.restored", func(v Version) (map[string]any, error) {
		if err := CanRestore(v); err != nil {
			return nil, err
		}
		return map[string]any{}, setDeprecation(ctx, tx, v.ID, nil)
	})
}

// Revoke withdraws a deprecated version: no CLI resolves it again.
func (s *Service) Revoke(ctx context.Context, p access.Principal, versionID, reason string) (Version, error) {
	return inTx(ctx, s, func(tx *sqlx.Tx) (Version, error) { return s.RevokeTx(ctx, tx, p, versionID, reason) })
}

// RevokeTx is Revoke in the caller's transaction.
func (s *Service) RevokeTx(ctx context.Context, tx *sqlx.Tx, p access.Principal, versionID, reason string) (Version, error) {
	if err := validateReason(reason); err != nil {
		return Version{}, err
	}
	return s.changeFlags(ctx, tx, p, versionID, "registry_module_version.revoked", func(v Version) (map[string]any, error) {
		if err := CanRevoke(v); err != nil {
			return nil, err
		}
		return map[string]any{"reason": reason}, setRevocation(ctx, tx, v.ID, &Revocation{Reason: reason, At: s.stamp(), By: p.ID})
	})
}

// Unrevoke returns a revoked version to deprecated.
func (s *Service) Unrevoke(ctx context.Context, p access.Principal, versionID string) (Version, error) {
	return inTx(ctx, s, func(tx *sqlx.Tx) (Version, error) { return s.UnrevokeTx(ctx, tx, p, versionID) })
}

// UnrevokeTx is Unrevoke in the caller's transaction.
func (s *Service) UnrevokeTx(ctx context.Context, tx *sqlx.Tx, p access.Principal, versionID string) (Version, error) {
	return s.changeFlags(ctx, tx, p, versionID, "registry_module_version.unrevoked", func(v Version) (map[string]any, error) {
		if err := CanUnrevoke(v); err != nil {
			return nil, err
		}
		return map[string]any{}, setRevocation(ctx, tx, v.ID, nil)
	})
}

// changeFlags runs one flag transition under the version's row lock, with
// its audit event.
func (s *Service) changeFlags(ctx context.Context, tx *sqlx.Tx, p access.Principal, versionID, action string,
	change func(v Version) (map[string]any, error),
) (Version, error) {
	if err := p.Require(access.PermRegistryWrite); err != nil {
		return Version{}, err
	}
	row, err := versionByID(ctx, tx, p.OrganizationID, versionID, true)
	if err != nil {
		return Version{}, err
	}
	evidence, err := change(row.version())
	if err != nil {
		return Version{}, err
	}
	evidence["module_id"], evidence["version"] = row.ModuleID, row.Version
	if err := audit.Record(ctx, tx, p, action, "registry_module_version", versionID, evidence); err != nil {
		return Version{}, err
	}
	changed, err := versionByID(ctx, tx, p.OrganizationID, versionID, false)
	return changed.version(), err
}

// DeleteVersion deletes a version; its archive is deleted once that has
// committed.
func (s *Service) DeleteVersion(ctx context.Context, p access.Principal, versionID string) error {
	return s.deleteThenRelease(ctx, func(tx *sqlx.Tx) ([]string, error) { return s.DeleteVersionTx(ctx, tx, p, versionID) })
}

// DeleteVersionTx is DeleteVersion in the caller's transaction; it
// returns the archive keys to delete (DeleteArchives) after the commit.
func (s *Service) DeleteVersionTx(ctx context.Context, tx *sqlx.Tx, p access.Principal, versionID string) ([]string, error) {
	if err := p.Require(access.PermRegistryWrite); err != nil {
		return nil, err
	}
	row, err := versionByID(ctx, tx, p.OrganizationID, versionID, false)
	if err != nil {
		return nil, err
	}
	// The module's lock first, as everywhere, then the version's.
	if err := lockModule(ctx, tx, p.OrganizationID, row.ModuleID); err != nil {
		return nil, err
	}
	if row, err = versionByID(ctx, tx, p.OrganizationID, versionID, true); err != nil {
		return nil, err
	}
	if err := deleteVersionRow(ctx, tx, versionID); err != nil {
		return nil, err
	}
	if err := refreshModuleStatus(ctx, tx, row.ModuleID, s.stamp()); err != nil {
		return nil, err
	}
	var keys []string
	if row.BlobKey.Valid {
		keys = append(keys, row.BlobKey.String)
	}
	return keys, audit.Record(ctx, tx, p, "registry_module_version.deleted", "registry_module_version", versionID,
		map[string]any{"module_id": row.ModuleID, "version": row.Version})
}

// OpenArchive opens a resolvable version's archive for a download
// capability bound to its digest: a version that is gone, revoked, or
// whose archive is not the one the capability names is not found. The
// reader fails rather than end cleanly if the stored bytes differ from
// the record.
func (s *Service) OpenArchive(ctx context.Context, versionID, sha256hex string) (io.ReadCloser, int64, error) {
	row, err := versionByID(ctx, s.db, "", versionID, false)
	if err != nil {
		return nil, 0, err
	}
	v := row.version()
	if !v.Resolvable() || v.ArchiveSHA256 == nil || *v.ArchiveSHA256 != sha256hex || !row.BlobKey.Valid {
		return nil, 0, fault.ErrNotFound
	}
	if s.blobs == nil {
		return nil, 0, ErrStorageUnavailable
	}
	sum, err := hex.DecodeString(sha256hex)
	if err != nil {
		return nil, 0, fault.ErrNotFound
	}
	sealed, err := s.blobs.Open(ctx, row.BlobKey.String, archiveIdentity(row.OrganizationID, row.ID))
	if err != nil {
		return nil, 0, fmt.Errorf("opening module archive: %w", err)
	}
	return blob.Verified(sealed, *v.ArchiveBytes, sum), *v.ArchiveBytes, nil
}
