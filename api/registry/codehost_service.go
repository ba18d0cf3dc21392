package registry

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/dispatch"
	"github.com/cairnhq/cairn/api/github"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
)

// JobInserter inserts a job in the caller's transaction (River's client).
type JobInserter interface {
	InsertTx(ctx context.Context, tx *sql.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// CodeHost publishes module versions from the code host: tag pushes and
// syncs create ingestions (in the transaction that accepts them), and
// each ingestion's job downloads the tag's commit, re-packs the bound
// directory and publishes it through the Service.
type CodeHost struct {
	db     *sqlx.DB
	reg    *Service
	app    *github.App
	jobs   JobInserter
	logger *slog.Logger
	now    func() time.Time
}

// NewCodeHost builds the publisher; app may be nil (unconfigured), and
// then everything that needs the provider fails closed.
func NewCodeHost(conn *sqlx.DB, reg *Service, app *github.App, jobs JobInserter, logger *slog.Logger) *CodeHost {
	return &CodeHost{db: conn, reg: reg, app: app, jobs: jobs, logger: logger, now: time.Now}
}

func (c *CodeHost) stamp() time.Time { return c.now().UTC().Truncate(time.Microsecond) }

// publisher is the principal an ingestion publishes as: the code-host app,
// in the module's organization, allowed to write its registry only.
func publisher(organizationID string) access.Principal {
	p := access.CodeHost(organizationID)
	p.Permissions = access.NewPermissionSet(access.PermRegistryRead, access.PermRegistryWrite)
	return p
}

var systemActor = audit.Actor{Type: audit.ActorSystem, ID: "github-app"}

// AcceptTag creates or reuses one ingestion per module bound to the
// pushed repository whose tag prefix leaves a version of the tag, in the
// delivery's acceptance transaction, dispatching each new one exactly
// once (github.TagPublisher).
func (c *CodeHost) AcceptTag(ctx context.Context, tx *sqlx.Tx, t github.TagPush, now time.Time) (github.TagAcceptance, error) {
	repo := t.Repository
	modules, err := modulesBoundTo(ctx, tx, repo.OrganizationID, repo.InstallationID, repo.RepositoryID)
	if err != nil {
		return github.TagAcceptance{}, err
	}
	if len(modules) == 0 {
		return github.TagAcceptance{Outcome: ReasonNoBoundModule}, nil
	}
	deliveryID := t.DeliveryID
	var ids []string
	for _, m := range modules {
		version, ok := TagVersion(m.TagPrefix, t.Tag)
		if !ok {
			continue
		}
		ingID, err := c.accept(ctx, tx, m, Ingestion{Trigger: TriggerTagPush, DeliveryID: &deliveryID, Tag: t.Tag,
			ObjectSHA: t.ObjectSHA, Version: version}, now)
		if err != nil {
			return github.TagAcceptance{}, err
		}
		ids = append(ids, ingID)
	}
	if len(ids) == 0 {
		return github.TagAcceptance{Outcome: ReasonTagNotSemver}, nil
	}
	return github.TagAcceptance{IngestionIDs: ids}, nil
}

// accept creates or reuses a module's ingestion of a tag; a new one is
// dispatched (module-ingestion-{id}) and audited in the same transaction.
func (c *CodeHost) accept(ctx context.Context, tx *sqlx.Tx, m boundModule, in Ingestion, now time.Time) (string, error) {
	in.ID, in.OrganizationID, in.ModuleID, in.CreatedAt = id.New("mig"), m.OrganizationID, m.ID, now
	in.InstallationID, in.RepositoryID, in.RepositoryOwner, in.RepositoryName = m.InstallationID, m.RepositoryID, m.Owner, m.Repository
	in.Directory = m.Directory
	ingID, created, err := createOrReuseIngestion(ctx, tx, in)
	if err != nil || !created {
		return ingID, err
	}
	if c.jobs == nil {
		return "", fmt.Errorf("no job inserter: %w", fault.ErrUnavailable)
	}
	if err := dispatch.Arm(ctx, tx, DispatchIngestion, m.OrganizationID, ingID, now); err != nil {
		return "", err
	}
	if _, err := c.jobs.InsertTx(ctx, tx.Tx, IngestArgs{IngestionID: ingID}, nil); err != nil {
		return "", fmt.Errorf("dispatching %s: %w", IngestionWorkflowID(ingID), err)
	}
	evidence := map[string]any{"module_id": m.ID, "trigger": in.Trigger, "tag": in.Tag, "version": in.Version,
		"object_sha": in.ObjectSHA, "workflow_id": IngestionWorkflowID(ingID)}
	if in.DeliveryID != nil {
		evidence["delivery_id"] = *in.DeliveryID
	}
	_, err = audit.Append(ctx, tx, audit.Entry{OrganizationID: m.OrganizationID, Action: "registry_module_ingestion.accepted",
		Actor: systemActor, TargetType: "registry_module_ingestion", TargetID: ingID, Evidence: evidence})
	return ingID, err
}

// Redeliver is the dispatch reconciler's handler for module ingestions: a
// pending one whose job was lost gets it again.
func (c *CodeHost) Redeliver(ctx context.Context, tx *sqlx.Tx, d dispatch.Record) (dispatch.Outcome, error) {
	ing, err := ingestionByID(ctx, tx, d.SubjectID, false)
	if errors.Is(err, fault.ErrNotFound) {
		return dispatch.Settled, nil // the module was deleted
	}
	if err != nil {
		return 0, err
	}
	if ing.Status != IngestionPending {
		return dispatch.Settled, nil
	}
	if c.jobs == nil {
		return 0, fmt.Errorf("no job inserter: %w", fault.ErrUnavailable)
	}
	res, err := c.jobs.InsertTx(ctx, tx.Tx, IngestArgs{IngestionID: ing.ID}, nil)
	if err != nil {
		return 0, fmt.Errorf("redelivering %s: %w", d.ID, err)
	}
	if res.UniqueSkippedAsDuplicate {
		return dispatch.Waiting, nil
	}
	return dispatch.Redelivered, nil
}

// errSettle ends an ingestion without a retry.
type errSettle struct {
	status, code, message string
}

func (e errSettle) Error() string { return "module ingestion " + e.status + ": " + e.code }

// Ingest runs one module ingestion to its end. Outside any transaction it
// resolves the tag's commit, downloads exactly that commit's archive
// through a fresh installation token, re-packs the bound directory (links
// and special entries carried over, for the archive rules to refuse) and
// publishes it as the tag's version, which ends ok or errored with a safe
// reason. A settled ingestion makes this a no-op; a temporary provider
// failure is returned for retry.
func (c *CodeHost) Ingest(ctx context.Context, ingestionID string) error {
	ing, err := ingestionByID(ctx, c.db, ingestionID, false)
	if errors.Is(err, fault.ErrNotFound) {
		return nil // the module, and with it the ingestion, was deleted
	}
	if err != nil || ing.Status != IngestionPending {
		return err
	}
	if !c.app.Ready() {
		return fmt.Errorf("%w: %w", fault.ErrUnavailable, github.ErrUnconfigured)
	}
	commit, versionID, err := c.publish(ctx, ing)
	var end errSettle
	switch {
	case errors.As(err, &end):
		return c.settle(ctx, ing.ID, end.status, end.code, end.message, commit, versionID)
	case err != nil:
		return err
	}
	v, err := c.reg.Version(ctx, publisher(ing.OrganizationID), versionID)
	if err != nil {
		return err
	}
	if v.Status == VersionOK {
		return c.settle(ctx, ing.ID, IngestionPublished, "", "", commit, versionID)
	}
	code, message := "archive_invalid", "the module archive was refused"
	if v.ErrorCode != nil {
		code = *v.ErrorCode
	}
	if v.ErrorMessage != nil {
		message = *v.ErrorMessage
	}
	return c.settle(ctx, ing.ID, IngestionErrored, code, message, commit, versionID)
}

// publish resolves, downloads, re-packs and publishes; an errSettle ends
// the ingestion, any other error is retried.
func (c *CodeHost) publish(ctx context.Context, ing Ingestion) (commit, versionID string, err error) {
	refSHA, commit, err := c.app.TagCommit(ctx, ing.InstallationID, ing.RepositoryOwner, ing.RepositoryName, ing.Tag)
	if errors.Is(err, github.ErrTagNotFound) {
		return "", "", errSettle{IngestionSkipped, ReasonTagNotFound, "the tag no longer exists at the code host"}
	}
	if err != nil {
		return "", "", err
	}
	// A push names the ref's object, a sync the commit the tag named.
	if ing.ObjectSHA != refSHA && ing.ObjectSHA != commit {
		return commit, "", errSettle{IngestionSkipped, ReasonTagMoved, "the tag names another commit than when it was seen"}
	}
	original, err := c.download(ctx, ing, commit)
	if err != nil {
		return commit, "", err
	}
	defer removeTemp(original)
	module, err := os.CreateTemp("", "cairn-module-*.tar.gz")
	if err != nil {
		return commit, "", fmt.Errorf("creating module archive file: %w", err)
	}
	defer removeTemp(module)
	if err := github.RepackDirectory(original, module, ing.Directory, true); err != nil {
		if errors.Is(err, github.ErrDirectoryMissing) {
			return commit, "", errSettle{IngestionErrored, ReasonDirectoryMissing, "the bound directory has no files at the tag's commit"}
		}
		return commit, "", errSettle{IngestionErrored, ReasonArchiveUnreadable, "the code host's archive of the commit is not a gzip-compressed tar"}
	}
	if _, err := module.Seek(0, io.SeekStart); err != nil {
		return commit, "", fmt.Errorf("rewinding module archive: %w", err)
	}
	v, err := c.pendingVersion(ctx, ing, commit)
	if err != nil {
		return commit, "", err
	}
	if v.Status == VersionPending {
		if v, err = c.reg.PublishArchive(ctx, v.ID, module); err != nil {
			return commit, "", err
		}
	}
	return commit, v.ID, nil
}

// download copies the commit's archive into a temporary file, refusing one
// over the configuration archive limit.
func (c *CodeHost) download(ctx context.Context, ing Ingestion, commit string) (*os.File, error) {
	body, declared, err := c.app.Tarball(ctx, ing.InstallationID, ing.RepositoryOwner, ing.RepositoryName, commit)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	tooLarge := errSettle{IngestionErrored, ReasonArchiveTooLarge,
		fmt.Sprintf("the code host's archive of the commit is over %d bytes", MaxArchiveBytes)}
	if declared > MaxArchiveBytes {
		return nil, tooLarge
	}
	f, err := os.CreateTemp("", "cairn-commit-*.tar.gz")
	if err != nil {
		return nil, fmt.Errorf("creating archive file: %w", err)
	}
	n, err := io.Copy(f, io.LimitReader(body, MaxArchiveBytes+1))
	if err == nil && n > MaxArchiveBytes {
		err = tooLarge
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		removeTemp(f)
		if errors.As(err, &errSettle{}) {
			return nil, err
		}
		return nil, fmt.Errorf("downloading archive: %w", err)
	}
	return f, nil
}

func removeTemp(f *os.File) {
	f.Close()
	os.Remove(f.Name())
}

// pendingVersion creates the tag's version, or finds the one an earlier
// attempt of this ingestion created (same tag and commit). A version of
// that string from anywhere else ends the ingestion as skipped.
func (c *CodeHost) pendingVersion(ctx context.Context, ing Ingestion, commit string) (Version, error) {
	p := publisher(ing.OrganizationID)
	v, err := c.reg.CreateVersion(ctx, p, ing.ModuleID, ing.Version, VersionOrigin{Kind: OriginTag, Tag: ing.Tag, CommitSHA: commit})
	if !errors.Is(err, ErrVersionExists) {
		return v, err
	}
	v, err = c.reg.VersionByString(ctx, p, ing.ModuleID, ing.Version)
	if err != nil {
		return Version{}, err
	}
	if v.Origin != OriginTag || v.Tag == nil || *v.Tag != ing.Tag || v.CommitSHA == nil || *v.CommitSHA != commit {
		return Version{}, errSettle{IngestionSkipped, ReasonVersionExists, "the module already has version " + ing.Version}
	}
	return v, nil
}

// settle ends a pending ingestion and completes its dispatch, with its
// audit event, in one transaction.
func (c *CodeHost) settle(ctx context.Context, ingestionID, status, code, message, commit, versionID string) error {
	return db.WithTx(ctx, c.db, func(tx *sqlx.Tx) error {
		ing, err := ingestionByID(ctx, tx, ingestionID, true)
		if errors.Is(err, fault.ErrNotFound) {
			return nil
		}
		if err != nil || ing.Status != IngestionPending {
			return err
		}
		now := c.stamp()
		ing.Status, ing.SettledAt = status, &now
		if code != "" {
			ing.ErrorCode, ing.ErrorMessage = &code, &message
		}
		if commit != "" {
			ing.CommitSHA = &commit
		}
		if versionID != "" {
			ing.VersionID = &versionID
		}
		if err := saveIngestion(ctx, tx, ing); err != nil {
			return err
		}
		if err := dispatch.Complete(ctx, tx, IngestionWorkflowID(ing.ID), now); err != nil {
			return err
		}
		evidence := map[string]any{"module_id": ing.ModuleID, "tag": ing.Tag, "version": ing.Version}
		if code != "" {
			evidence["reason"] = code
		}
		if versionID != "" {
			evidence["version_id"] = versionID
		}
		_, err = audit.Append(ctx, tx, audit.Entry{OrganizationID: ing.OrganizationID,
			Action: "registry_module_ingestion." + status, Actor: systemActor, TargetType: "registry_module_ingestion",
			TargetID: ing.ID, Evidence: evidence})
		return err
	})
}

// ResolveSource checks a binding for a module of p's organization: the
// repository must be selected in the organization's connected
// installation, the directory repository-relative, the tag prefix bounded.
// nil input (or a nil repository) is no binding.
func (c *CodeHost) ResolveSource(ctx context.Context, q sqlx.QueryerContext, p access.Principal, in *SourceInput) (*Source, error) {
	if in == nil || in.RepositoryID == nil {
		return nil, nil
	}
	dir, ok := github.CleanDirectory(in.Directory)
	if !ok {
		return nil, fmt.Errorf("%w: directory must be a repository-relative path", ErrInvalid)
	}
	if err := validateTagPrefix(in.TagPrefix); err != nil {
		return nil, err
	}
	repo, err := github.SelectedRepository(ctx, q, p.OrganizationID, *in.RepositoryID)
	if err != nil {
		return nil, err
	}
	if repo == nil {
		return nil, fmt.Errorf("%w: repository_id is not selected in the organization's installation", ErrInvalid)
	}
	return &Source{InstallationID: repo.InstallationID, RepositoryID: repo.RepositoryID, Owner: repo.Owner,
		Repository: repo.Name, Directory: dir, TagPrefix: in.TagPrefix}, nil
}

// SetSource binds a module to a repository, changes its binding or (nil
// repository) unbinds it, with its audit event, in the caller's
// transaction, and returns the module as it is then. Ingestions already
// accepted keep the binding they copied.
func (c *CodeHost) SetSource(ctx context.Context, tx *sqlx.Tx, p access.Principal, moduleID string, in SourceInput) (Module, error) {
	if err := p.Require(access.PermRegistryWrite); err != nil {
		return Module{}, err
	}
	m, err := c.reg.Module(ctx, p, moduleID)
	if err != nil {
		return Module{}, err
	}
	if _, _, err := boundModuleByID(ctx, tx, p.OrganizationID, moduleID); err != nil {
		return Module{}, err
	}
	src, err := c.ResolveSource(ctx, tx, p, &in)
	if err != nil {
		return Module{}, err
	}
	evidence := map[string]any{"bound": src != nil}
	var b *boundModule
	if src != nil {
		b = &boundModule{InstallationID: src.InstallationID, RepositoryID: src.RepositoryID, Owner: src.Owner,
			Repository: src.Repository, Directory: src.Directory, TagPrefix: src.TagPrefix}
		evidence["repository_id"], evidence["directory"], evidence["tag_prefix"] = src.RepositoryID, src.Directory, src.TagPrefix
	}
	now := c.stamp()
	if err := saveBinding(ctx, tx, moduleID, b, now); err != nil {
		return Module{}, err
	}
	m.Source, m.UpdatedAt = src, now
	if m.Status == ModuleNoVersionTags {
		m.Status = ModulePending
	}
	return m, audit.Record(ctx, tx, p, "registry_module.source_changed", "registry_module", moduleID, evidence)
}

// Sync reads every tag of the module's repository and, in one
// transaction, creates an ingestion (dispatched like a tag push's) for
// each matching tag the module has neither an ingestion nor a version of.
// A module with no version and no matching tag is marked
// no_version_tags.
//
// settle runs in that transaction with the result, so an idempotent
// caller records its answer exactly when the sync commits.
func (c *CodeHost) Sync(ctx context.Context, p access.Principal, moduleID string,
	settle func(ctx context.Context, tx *sqlx.Tx, res SyncResult) error) (SyncResult, error) {
	if err := p.Require(access.PermRegistryWrite); err != nil {
		return SyncResult{}, err
	}
	m, err := c.reg.Module(ctx, p, moduleID)
	if err != nil {
		return SyncResult{}, err
	}
	if m.Source == nil {
		return SyncResult{}, ErrNotBound
	}
	if !c.app.Ready() {
		return SyncResult{}, fmt.Errorf("%w: %w", fault.ErrUnavailable, github.ErrUnconfigured)
	}
	repo, err := github.SelectedRepository(ctx, c.db, p.OrganizationID, m.Source.RepositoryID)
	if err != nil {
		return SyncResult{}, err
	}
	if repo == nil || repo.InstallationID != m.Source.InstallationID {
		return SyncResult{}, ErrSourceUnavailable
	}
	tags, err := c.app.Tags(ctx, repo.InstallationID, repo.Owner, repo.Name)
	if err != nil {
		return SyncResult{}, fmt.Errorf("%w: %w", fault.ErrUnavailable, err)
	}
	var res SyncResult
	err = db.WithTx(ctx, c.db, func(tx *sqlx.Tx) error {
		res = SyncResult{}
		b, bound, err := boundModuleByID(ctx, tx, p.OrganizationID, moduleID)
		if err != nil {
			return err
		}
		if !bound || b.RepositoryID != repo.RepositoryID {
			return ErrNotBound // rebound or unbound meanwhile
		}
		ingested, err := ingestedTags(ctx, tx, moduleID)
		if err != nil {
			return err
		}
		versions, err := versionStrings(ctx, tx, moduleID)
		if err != nil {
			return err
		}
		now := c.stamp()
		matched := 0
		type pick struct{ version, tag, sha string }
		var picks []pick
		for _, t := range tags {
			version, ok := TagVersion(b.TagPrefix, t.Name)
			switch {
			case !ok:
				continue
			case ingested[t.Name]:
				res.Skipped = append(res.Skipped, SkippedTag{Tag: t.Name, Reason: ReasonAlreadyIngested})
			case versions[version]:
				res.Skipped = append(res.Skipped, SkippedTag{Tag: t.Name, Reason: ReasonVersionExists})
			default:
				picks = append(picks, pick{version, t.Name, t.CommitSHA})
				versions[version] = true // two tags of one version: the first listed wins
			}
			matched++
		}
		slices.SortFunc(picks, func(a, b pick) int {
			va, _ := ParseSemver(a.version)
			vb, _ := ParseSemver(b.version)
			return CompareVersions(va, vb)
		})
		for _, pk := range picks {
			if _, err := c.accept(ctx, tx, b, Ingestion{Trigger: TriggerSync, Tag: pk.tag, ObjectSHA: pk.sha,
				Version: pk.version}, now); err != nil {
				return err
			}
			res.Published = append(res.Published, pk.version)
		}
		if matched == 0 {
			if err := markNoVersionTags(ctx, tx, moduleID, now); err != nil {
				return err
			}
		}
		if err := audit.Record(ctx, tx, p, "registry_module.synced", "registry_module", moduleID, map[string]any{
			"tags": len(tags), "published": len(res.Published), "skipped": len(res.Skipped)}); err != nil {
			return err
		}
		if settle == nil {
			return nil
		}
		return settle(ctx, tx, res)
	})
	return res, err
}
