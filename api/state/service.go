package state

import (
	"cmp"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/platform/blob"
	"github.com/cairnhq/cairn/api/platform/blobkey"
	"github.com/cairnhq/cairn/api/platform/cursor"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fanout"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/platform/seal"
	"github.com/cairnhq/cairn/api/platform/telemetry"
	"github.com/cairnhq/cairn/api/workspace"
)

// Service is workspace state: immutable, numbered versions whose bytes are
// sealed in blob storage and verified against their declared MD5.
type Service struct {
	db         *sqlx.DB
	blobs      *blob.Store
	workspaces *workspace.Service
	observer   Observer
	logger     *slog.Logger
	now        func() time.Time
}

// Observer learns of every state version that becomes its workspace's
// current one, inside the transaction that makes it so.
type Observer interface {
	StateFinalized(ctx context.Context, tx *sqlx.Tx, v Version) error
}

// Observe sets the observer of finalized versions. It is set once, while
// the services are assembled, before any request is served: the run
// service, which needs this one to exist first, discards the plans a new
// state makes stale.
func (s *Service) Observe(o Observer) { s.observer = o }

// NewService returns the state service. blobs may be nil (no master key):
// writing and reading state then fails closed.
func NewService(conn *sqlx.DB, blobs *blob.Store, workspaces *workspace.Service, logger *slog.Logger) *Service {
	return &Service{db: conn, blobs: blobs, workspaces: workspaces, logger: logger, now: time.Now}
}

func (s *Service) stamp() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

func (s *Service) storage() (*blob.Store, error) {
	if s.blobs == nil {
		return nil, fmt.Errorf("state storage needs CAIRN_MASTER_KEY: %w", fault.ErrUnavailable)
	}
	return s.blobs, nil
}

// Create declares a pending version of a workspace the principal has
// locked. Its bytes arrive later through Upload; only then does it become
// current.
func (s *Service) Create(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID string, in CreateInput) (Version, error) {
	if err := in.validate(); err != nil {
		return Version{}, err
	}
	if _, err := s.storage(); err != nil {
		return Version{}, err
	}
	w, err := s.workspaces.WorkspaceForWrite(ctx, tx, p, workspaceID, access.PermStateWrite)
	if err != nil {
		return Version{}, err
	}
	if !w.HeldBy(workspace.Holder(p)) {
		return Version{}, ErrNotLockedByWriter
	}
	current, err := currentVersion(ctx, tx, w.OrganizationID, w.ID)
	if err != nil {
		return Version{}, err
	}
	if err := succeeds(current, in); err != nil {
		return Version{}, err
	}
	v := Version{
		ID: id.New("sv"), OrganizationID: w.OrganizationID, WorkspaceID: w.ID, Serial: in.Serial, Lineage: in.Lineage,
		MD5: in.MD5, Force: in.Force, Status: StatusPending, CreatedByKind: p.Kind, CreatedByID: p.ID, CreatedAt: s.stamp(),
	}
	if in.RunID != "" {
		v.RunID = &in.RunID
	}
	if err := insertVersion(ctx, tx, v); err != nil {
		return Version{}, err
	}
	return v, audit.Record(ctx, tx, p, "state_version.created", "state_version", v.ID, map[string]any{
		"workspace_id": w.ID, "serial": v.Serial, "force": v.Force,
	})
}

// PendingOwner returns the organization and workspace of a version, for
// admission of capability uploads before any byte is read.
func (s *Service) PendingOwner(ctx context.Context, versionID string) (Version, error) {
	return versionByID(ctx, s.db, "", versionID, false)
}

// Upload streams the bytes of a pending version into sealed storage,
// checks them against the declared MD5 and finalizes the version: it gets
// its number and becomes current. Any failure leaves no version and no
// object behind. Uploading the same bytes to a finalized version again is
// accepted without reading them.
func (s *Service) Upload(ctx context.Context, versionID string, r io.Reader) (Version, error) {
	began := time.Now()
	blobs, err := s.storage()
	if err != nil {
		return Version{}, err
	}
	v, err := versionByID(ctx, s.db, "", versionID, false)
	if err != nil {
		return Version{}, err
	}
	if v.Finalized() {
		return v, nil
	}
	// A key of this upload's own: concurrent uploads of one pending version
	// (a retried PUT, two recoveries resuming one import) each clean up
	// only what they wrote, never the object another one finalized.
	key := blobkey.State(v.OrganizationID, v.WorkspaceID, v.ID)
	parsed, digests, err := s.storeParsed(ctx, blobs, key, "state/"+v.ID, r)
	if err != nil {
		return Version{}, err
	}
	if hex.EncodeToString(digests.MD5) != v.MD5 {
		_ = blobs.Delete(ctx, key)
		return Version{}, ErrChecksumMismatch
	}
	err = db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		if err := LockVersions(ctx, tx, v.WorkspaceID); err != nil {
			return err
		}
		locked, err := versionByID(ctx, tx, "", v.ID, true)
		if err != nil {
			return err
		}
		if locked.Finalized() {
			return errAlreadyFinal
		}
		if err := runStillWrites(ctx, tx, locked); err != nil {
			return err
		}
		current, err := currentVersion(ctx, tx, v.OrganizationID, v.WorkspaceID)
		if err != nil {
			return err
		}
		if err := succeeds(current, CreateInput{Serial: v.Serial, MD5: v.MD5, Lineage: v.Lineage, Force: v.Force}); err != nil {
			return err
		}
		number, err := nextNumber(ctx, tx, v.WorkspaceID)
		if err != nil {
			return err
		}
		now := s.stamp()
		v.Number, v.Status, v.SHA256, v.Size, v.BlobKey = &number, StatusFinalized, digests.SHA256, &digests.Size, &key
		v.ToolVersion, v.FinalizedAt, v.ResourceCount, v.ResourcesCounted = parsed.ToolVersion, &now, parsed.ResourceCount, parsed.ResourcesCounted
		if err := finalizeVersion(ctx, tx, v); err != nil {
			return err
		}
		if err := insertOutputs(ctx, tx, outputsFrom(v.ID, parsed.Outputs)); err != nil {
			return err
		}
		if s.observer != nil {
			if err := s.observer.StateFinalized(ctx, tx, v); err != nil {
				return err
			}
		}
		_, err = audit.Append(ctx, tx, audit.Entry{
			OrganizationID: v.OrganizationID, Action: "state_version.finalized",
			Actor:      audit.ActorOf(access.Principal{Kind: v.CreatedByKind, ID: v.CreatedByID}),
			TargetType: "state_version", TargetID: v.ID,
			Evidence: map[string]any{"workspace_id": v.WorkspaceID, "number": number, "serial": v.Serial,
				"size_bytes": digests.Size, "sha256": hex.EncodeToString(digests.SHA256)},
		})
		return err
	})
	if errors.Is(err, errAlreadyFinal) {
		_ = blobs.Delete(ctx, key)
		return versionByID(ctx, s.db, "", v.ID, false)
	}
	if err != nil {
		_ = blobs.Delete(ctx, key)
		return Version{}, err
	}
	// Only what committed is reported, and only by opaque IDs and sizes.
	if s.logger != nil {
		_ = telemetry.Emit(ctx, s.logger, telemetry.Event{Name: "state_version_stored", Fields: map[string]telemetry.Value{
			"organization_id": telemetry.ID(v.OrganizationID), "workspace_id": telemetry.ID(v.WorkspaceID),
			"state_version_id": telemetry.ID(v.ID), "size": telemetry.Bytes(digests.Size),
			"duration": telemetry.Duration(time.Since(began)),
		}})
	}
	return v, nil
}

var errAlreadyFinal = errors.New("finalized concurrently")

// storeParsed streams r into the blob store while a second goroutine reads
// the header and outputs from the same bytes, running ahead of it through
// a bounded queue rather than taking turns with it.
func (s *Service) storeParsed(ctx context.Context, blobs *blob.Store, key, identity string, r io.Reader) (Parsed, blob.Digests, error) {
	var p Parsed
	parser := fanout.Start(func(r io.Reader) error {
		p, _ = ParseState(r)
		return nil
	})
	digests, err := blobs.Put(ctx, key, identity, io.TeeReader(r, parser), MaxStateBytes)
	_ = parser.CloseWithError(err)
	if errors.Is(err, blob.ErrTooLarge) {
		return p, digests, ErrTooLarge
	}
	return p, digests, err
}

func outputsFrom(versionID string, parsed map[string]ParsedOutput) []Output {
	out := make([]Output, 0, len(parsed))
	for name, o := range parsed {
		row := Output{ID: id.New("wsout"), StateVersionID: versionID, Name: name, Sensitive: o.Sensitive, TypeJSON: string(o.Type)}
		if row.TypeJSON == "" {
			row.TypeJSON = `"string"`
		}
		if !o.Sensitive {
			value := string(o.Value)
			if value == "" {
				value = "null"
			}
			row.ValueJSON = &value
		}
		out = append(out, row)
	}
	return out
}

// UploadJSON stores the JSON rendering of a version's state next to it. It
// is informational: a later upload replaces an earlier one.
func (s *Service) UploadJSON(ctx context.Context, versionID string, r io.Reader) error {
	blobs, err := s.storage()
	if err != nil {
		return err
	}
	v, err := versionByID(ctx, s.db, "", versionID, false)
	if err != nil {
		return err
	}
	key := blobkey.StateJSON(v.OrganizationID, v.WorkspaceID, v.ID)
	if _, err := blobs.Put(ctx, key, "state-json/"+v.ID, r, MaxStateBytes); err != nil {
		if errors.Is(err, blob.ErrTooLarge) {
			return ErrTooLarge
		}
		return err
	}
	previous, err := setJSONBlob(ctx, s.db, v.ID, key)
	if err != nil {
		_ = blobs.Delete(ctx, key)
		return err
	}
	if previous != "" {
		_ = blobs.Delete(ctx, previous)
	}
	return nil
}

// visible loads a version the principal holds perm on in its workspace:
// state:read for the version and its body, state:read_outputs for its
// outputs alone.
func (s *Service) visible(ctx context.Context, p access.Principal, versionID string, perm access.Permission) (Version, error) {
	if err := p.Require(perm); err != nil {
		return Version{}, err
	}
	v, err := versionByID(ctx, s.db, p.OrganizationID, versionID, false)
	if err != nil {
		return Version{}, err
	}
	// A run token's confinement is read beside the workspace's check: a
	// sandboxed command reads its state this way in every plan and apply.
	confined := make(chan error, 1)
	if p.Kind == access.KindRun {
		go func() { confined <- s.runMayRead(ctx, p, v) }()
	} else {
		confined <- nil
	}
	_, err = s.workspaces.WorkspaceWith(ctx, p, v.WorkspaceID, perm)
	if err = cmp.Or(err, <-confined); err != nil {
		return Version{}, err
	}
	return v, nil
}

// Get reads one version's metadata.
func (s *Service) Get(ctx context.Context, p access.Principal, versionID string) (Version, error) {
	return s.visible(ctx, p, versionID, access.PermStateRead)
}

// Current returns the workspace's current version, or fault.ErrNotFound
// when it has none yet.
func (s *Service) Current(ctx context.Context, p access.Principal, workspaceID string) (Version, error) {
	return s.current(ctx, p, workspaceID, access.PermStateRead)
}

// CurrentWithOutputs is Current with the version's outputs (sensitive
// values absent), read under the check Current makes: state:read admits
// a version's outputs, and the workspace's current version is the one a
// run token may read.
func (s *Service) CurrentWithOutputs(ctx context.Context, p access.Principal, workspaceID string) (Version, []Output, error) {
	v, err := s.current(ctx, p, workspaceID, access.PermStateRead)
	if err != nil || !v.Finalized() {
		return v, nil, err
	}
	outputs, err := outputsOf(ctx, s.db, v.ID)
	if err != nil {
		return Version{}, nil, err
	}
	return v, outputs, nil
}

// CurrentOutputs lists the outputs of the workspace's current version
// (sensitive values absent) to a principal that may read outputs there,
// state:read_outputs alone being enough; fault.ErrNotFound when the
// workspace has no state yet.
func (s *Service) CurrentOutputs(ctx context.Context, p access.Principal, workspaceID string) ([]Output, error) {
	v, err := s.current(ctx, p, workspaceID, access.PermStateReadOutputs)
	if err != nil {
		return nil, err
	}
	return outputsOf(ctx, s.db, v.ID)
}

// current loads the workspace's current version for a principal holding
// perm in the workspace.
func (s *Service) current(ctx context.Context, p access.Principal, workspaceID string, perm access.Permission) (Version, error) {
	if err := p.Require(perm); err != nil {
		return Version{}, err
	}
	w, err := s.workspaces.WorkspaceWith(ctx, p, workspaceID, perm)
	if err != nil {
		return Version{}, err
	}
	v, err := currentVersion(ctx, s.db, w.OrganizationID, w.ID)
	if err != nil {
		return Version{}, err
	}
	if v == nil {
		return Version{}, fault.ErrNotFound
	}
	return *v, nil
}

// CurrentOfWorkspace returns the current version of a workspace, or nil.
// It checks no permission: the caller has loaded the workspace, or reads
// it at the same time and drops the answer unless the principal may see
// that workspace.
func (s *Service) CurrentOfWorkspace(ctx context.Context, organizationID, workspaceID string) (*Version, error) {
	return currentVersion(ctx, s.db, organizationID, workspaceID)
}

// Download opens the plaintext of a finalized version. A version whose
// record does not describe releasable bytes is not found; the body fails
// instead of releasing its last byte unless the object is exactly the
// recorded size and SHA-256 (blob.Verified). An object that is gone, or
// whose sealed header does not open for this version, is not found either.
func (s *Service) Download(ctx context.Context, p access.Principal, versionID string) (io.ReadCloser, Version, error) {
	blobs, err := s.storage()
	if err != nil {
		return nil, Version{}, err
	}
	v, err := s.visible(ctx, p, versionID, access.PermStateRead)
	if err != nil {
		return nil, Version{}, err
	}
	if !releasable(v) {
		return nil, Version{}, fault.ErrNotFound
	}
	r, err := blobs.Open(ctx, *v.BlobKey, "state/"+v.ID)
	if errors.Is(err, blob.ErrNotFound) || errors.Is(err, seal.ErrCorrupt) {
		return nil, Version{}, fault.ErrNotFound
	}
	if err != nil {
		return nil, Version{}, err
	}
	return blob.Verified(r, *v.Size, v.SHA256), v, nil
}

// Outputs lists a version's outputs; sensitive values are absent.
func (s *Service) Outputs(ctx context.Context, p access.Principal, versionID string) ([]Output, error) {
	_, outputs, err := s.VersionOutputs(ctx, p, versionID)
	return outputs, err
}

// VersionOutputs reads a version and its outputs (sensitive values absent)
// for a principal that may read outputs in its workspace: state:read_outputs
// alone is enough, and the version comes back for its status, never its
// body.
func (s *Service) VersionOutputs(ctx context.Context, p access.Principal, versionID string) (Version, []Output, error) {
	v, err := s.visible(ctx, p, versionID, access.PermStateReadOutputs)
	if err != nil {
		return Version{}, nil, err
	}
	outputs, err := outputsOf(ctx, s.db, v.ID)
	return v, outputs, err
}

// Output reads one output; a sensitive output's value is absent.
func (s *Service) Output(ctx context.Context, p access.Principal, outputID string) (Output, error) {
	if err := p.Require(access.PermStateReadOutputs); err != nil {
		return Output{}, err
	}
	o, v, err := outputByID(ctx, s.db, p.OrganizationID, outputID)
	if err != nil {
		return Output{}, err
	}
	if _, err := s.workspaces.WorkspaceWith(ctx, p, v.WorkspaceID, access.PermStateReadOutputs); err != nil {
		return Output{}, err
	}
	if err := s.runMayRead(ctx, p, v); err != nil {
		return Output{}, err
	}
	return o, nil
}

// History reads a page of a workspace's finalized versions, newest first.
func (s *Service) History(ctx context.Context, p access.Principal, workspaceID string, page cursor.Page) ([]Version, error) {
	if err := requireHistory(p); err != nil {
		return nil, err
	}
	w, err := s.workspaces.WorkspaceWith(ctx, p, workspaceID, access.PermStateRead)
	if err != nil {
		return nil, err
	}
	return listVersions(ctx, s.db, w.OrganizationID, w.ID, true, page)
}

// HistoryPage reads finalized versions by page number (remote-backend
// pagination) with the total count.
func (s *Service) HistoryPage(ctx context.Context, p access.Principal, workspaceID string, number, size int) ([]Version, int, error) {
	if err := requireHistory(p); err != nil {
		return nil, 0, err
	}
	w, err := s.workspaces.WorkspaceWith(ctx, p, workspaceID, access.PermStateRead)
	if err != nil {
		return nil, 0, err
	}
	total, err := countFinalized(ctx, s.db, w.OrganizationID, w.ID)
	if err != nil {
		return nil, 0, err
	}
	rows, err := pageByOffset(ctx, s.db, w.OrganizationID, w.ID, (number-1)*size, size)
	return rows, total, err
}

// OutputValue decodes a stored non-sensitive value.
func (o Output) OutputValue() any {
	if o.ValueJSON == nil {
		return nil
	}
	var v any
	if err := json.Unmarshal([]byte(*o.ValueJSON), &v); err != nil {
		return nil
	}
	return v
}

// DeleteObjects removes stored objects whose references are already gone,
// best effort: what fails stays for the orphan sweep.
func (s *Service) DeleteObjects(ctx context.Context, keys []string) {
	if s.blobs == nil {
		return
	}
	for _, k := range keys {
		_ = s.blobs.Delete(ctx, k)
	}
}

// ImportRecovered publishes a state a run could not publish itself (an
// emergency state kept from a failed apply) as the workspace's next
// version, with the ID versionID. Only run recovery calls it, after
// checking the recovering principal's permissions, step-up and evidence;
// it is forced because the current state is exactly what recovery found to
// be wrong. One versionID imports once: a recovery that resumes after a
// failure, or two requests of it at once, get the same version back (its
// upload finished if it had stopped half-way), never a second one.
func (s *Service) ImportRecovered(ctx context.Context, p access.Principal, workspaceID, runID, versionID string, open func() (io.ReadCloser, error)) (Version, error) {
	v, err := versionByID(ctx, s.db, p.OrganizationID, versionID, false)
	if errors.Is(err, fault.ErrNotFound) {
		v, err = s.insertRecovered(ctx, p, workspaceID, runID, versionID, open)
	}
	if err != nil {
		return Version{}, err
	}
	if v.WorkspaceID != workspaceID || v.RunID == nil || *v.RunID != runID {
		return Version{}, fmt.Errorf("state version %s was not imported for run %s", versionID, runID)
	}
	if v.Finalized() {
		return v, nil
	}
	rc, err := open()
	if err != nil {
		return Version{}, err
	}
	defer rc.Close()
	return s.Upload(ctx, v.ID, rc)
}

// insertRecovered reads the state's header and records it as the pending
// version versionID, or returns that version when a concurrent import
// recorded it first.
func (s *Service) insertRecovered(ctx context.Context, p access.Principal, workspaceID, runID, versionID string, open func() (io.ReadCloser, error)) (Version, error) {
	rc, err := open()
	if err != nil {
		return Version{}, err
	}
	sum := md5.New()
	parsed, err := ParseState(io.TeeReader(rc, sum))
	if err == nil {
		_, err = io.Copy(sum, rc)
	}
	rc.Close()
	if err != nil {
		return Version{}, fmt.Errorf("reading emergency state: %w", err)
	}
	w, err := workspace.WorkspaceByID(ctx, s.db, p.OrganizationID, workspaceID, false)
	if err != nil {
		return Version{}, err
	}
	v := Version{
		ID: versionID, OrganizationID: w.OrganizationID, WorkspaceID: w.ID, Serial: parsed.Serial, Lineage: parsed.Lineage,
		MD5: hex.EncodeToString(sum.Sum(nil)), Force: true, Status: StatusPending, CreatedByKind: p.Kind, CreatedByID: p.ID,
		RunID: &runID, CreatedAt: s.stamp(),
	}
	err = insertVersion(ctx, s.db, v)
	if db.IsUniqueViolation(err, "state_versions_pkey") {
		return versionByID(ctx, s.db, p.OrganizationID, versionID, false)
	}
	return v, err
}
