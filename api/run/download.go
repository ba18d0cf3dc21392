package run

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/platform/blob"
	"github.com/cairnhq/cairn/api/platform/blobkey"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/seal"
	"github.com/cairnhq/cairn/api/state"
)

// Restricted downloads (SPEC §4 rule 3): the raw bytes Cairn otherwise
// only shows redacted. Each names what it releases.
const (
	DownloadPlanFile       = "plan_file"
	DownloadPlanJSON       = "plan_json"
	DownloadEmergencyState = "emergency_state"
	DownloadState          = "state"
)

// MaxDownloadFormBytes bounds a restricted download's form body.
const MaxDownloadFormBytes = 4 << 10

// Download is an opened artifact: the caller streams Body (declared as
// exactly Size bytes; it fails rather than end early or late) and closes
// it. A restricted download's audit record is already committed.
type Download struct {
	Body   io.ReadCloser
	Size   int64
	SHA256 []byte
	// Name is a file name for Content-Disposition.
	Name string
}

// downloadPermissions are what each download needs beyond
// artifact:read_sensitive and a recent step-up; run:recover alone is never
// enough for the emergency state.
var downloadPermissions = map[string][]access.Permission{
	DownloadPlanFile:       {access.PermRunRead},
	DownloadPlanJSON:       {access.PermRunRead},
	DownloadEmergencyState: {access.PermRunRead, access.PermStateRecover},
	DownloadState:          {access.PermStateRead},
}

// authorizeDownload checks the reason, the permissions and the step-up,
// before anything is read.
func (s *Service) authorizeDownload(p access.Principal, kind, rawReason string) (string, error) {
	reason, err := ReasonOf(rawReason)
	if err != nil {
		return "", err
	}
	perms, ok := downloadPermissions[kind]
	if !ok {
		return "", fault.ErrNotFound
	}
	if err := p.RequireHuman(); err != nil {
		return "", err
	}
	for _, perm := range append([]access.Permission{access.PermArtifactReadSensitive}, perms...) {
		if err := p.Require(perm); err != nil {
			return "", err
		}
	}
	if err := p.RequireStepUp(s.now()); err != nil {
		return "", err
	}
	return reason, nil
}

// OpenRunDownload releases a run artifact (the saved plan, the JSON plan
// or the emergency state) to a principal with sensitive-artifact access
// and a recent step-up: the sealed object is opened, its audit record
// committed, and only then is it returned for streaming. Another
// organization's run, or one without the artifact, is not found.
func (s *Service) OpenRunDownload(ctx context.Context, p access.Principal, runID, kind, reason string) (Download, error) {
	if kind == DownloadState {
		return Download{}, fault.ErrNotFound
	}
	reason, err := s.authorizeDownload(p, kind, reason)
	if err != nil {
		return Download{}, err
	}
	r, err := s.GetRun(ctx, p, runID)
	if err != nil {
		return Download{}, err
	}
	if err := requireIn(p, r, append([]access.Permission{access.PermArtifactReadSensitive}, downloadPermissions[kind]...)...); err != nil {
		return Download{}, err
	}
	return s.releaseArtifact(ctx, p, r, kind, reason)
}

// releaseArtifact opens a run's artifact of kind and commits the audit
// record of its release (with the reason, when the release asked for
// one) before returning it: opening first means an unavailable artifact
// records no download that never happened.
func (s *Service) releaseArtifact(ctx context.Context, p access.Principal, r Run, kind, reason string) (Download, error) {
	a, body, err := s.openVerified(ctx, r, kind)
	if err != nil {
		return Download{}, err
	}
	evidence := map[string]any{"artifact_id": a.ID, "workspace_id": r.WorkspaceID, "size_bytes": a.SizeBytes,
		"sha256": HexDigest(a.SHA256)}
	if reason != "" {
		evidence = withReason(evidence, reason)
	}
	if err := s.auditDownload(ctx, p, kind, "run", r.ID, evidence); err != nil {
		body.Close()
		return Download{}, err
	}
	name := map[string]string{DownloadPlanFile: ".tfplan", DownloadPlanJSON: ".plan.json", DownloadEmergencyState: ".emergency.tfstate"}[kind]
	return Download{Body: body, Size: a.SizeBytes, SHA256: a.SHA256, Name: r.ID + name}, nil
}

// ExportPlanJSON releases a run's JSON plan, sensitive values in clear, on
// the remote-backend API (GET /api/v2/plans/{id}/json-output): to a
// principal holding artifact:read_sensitive besides run:read, for a run
// inside its boundary and of exactly workspaceID, the workspace the request
// resolved to. A run token never holds that permission. Tokens cannot step
// up, so neither a step-up nor a reason is asked; the audit record is the
// restricted download's, committed before the body is returned.
func (s *Service) ExportPlanJSON(ctx context.Context, p access.Principal, runID, workspaceID string) (Download, error) {
	if p.Kind == access.KindRun {
		return Download{}, fmt.Errorf("%w: a run token never exports plans", fault.ErrForbidden)
	}
	if err := p.Require(access.PermArtifactReadSensitive); err != nil {
		return Download{}, err
	}
	r, err := s.runOfWorkspace(ctx, p, runID, workspaceID)
	if err != nil {
		return Download{}, err
	}
	if err := requireIn(p, r, access.PermArtifactReadSensitive); err != nil {
		return Download{}, err
	}
	return s.releaseArtifact(ctx, p, r, DownloadPlanJSON, "")
}

// RedactedPlanJSON opens a saved plan's redacted JSON plan (GET
// /api/v2/plans/{id}/json-output-redacted, what `tofu show` of a saved
// cloud plan renders) for a principal with run:read, for a run inside its
// boundary and of exactly workspaceID. Nothing in it is sensitive, so its
// release is not audited.
func (s *Service) RedactedPlanJSON(ctx context.Context, p access.Principal, runID, workspaceID string) (Download, error) {
	r, err := s.runOfWorkspace(ctx, p, runID, workspaceID)
	if err != nil {
		return Download{}, err
	}
	a, body, err := s.openVerified(ctx, r, ArtifactPlanJSONRedacted)
	if err != nil {
		return Download{}, err
	}
	return Download{Body: body, Size: a.SizeBytes, SHA256: a.SHA256, Name: r.ID + ".redacted.plan.json"}, nil
}

// runOfWorkspace reads a run the principal may read, which must belong to
// workspaceID: a run of any other workspace is not found.
func (s *Service) runOfWorkspace(ctx context.Context, p access.Principal, runID, workspaceID string) (Run, error) {
	r, err := s.GetRun(ctx, p, runID)
	if err != nil {
		return Run{}, err
	}
	if workspaceID == "" || r.WorkspaceID != workspaceID {
		return Run{}, fault.ErrNotFound
	}
	return r, nil
}

// openVerified opens run r's artifact of kind for release (SPEC §4
// "JSON-plan streaming integrity"). Its record must be r's own (run,
// organization, kind, an object key under r's keys for that kind) and
// describe a plaintext within the export limit with a SHA-256, and the
// object's sealed header must open for exactly that identity; otherwise it
// is unavailable, the same not-found as a missing one, before any byte.
// The body fails instead of releasing its last byte unless the object's
// plaintext is exactly the recorded size and digest (blob.Verified).
func (s *Service) openVerified(ctx context.Context, r Run, kind string) (Artifact, io.ReadCloser, error) {
	a, err := artifactOf(ctx, s.db, r.ID, kind)
	if errors.Is(err, ErrArtifactUnavailable) {
		return Artifact{}, nil, fault.ErrNotFound
	}
	if err != nil {
		return Artifact{}, nil, err
	}
	if !describes(a, r, kind) {
		return Artifact{}, nil, fault.ErrNotFound
	}
	body, err := s.openArtifactRow(ctx, a)
	if err != nil {
		return Artifact{}, nil, missingBlob(err)
	}
	return a, blob.Verified(body, a.SizeBytes, a.SHA256), nil
}

// describes reports whether artifact record a is one run r may release as
// kind.
func describes(a Artifact, r Run, kind string) bool {
	return a.RunID == r.ID && a.OrganizationID == r.OrganizationID && a.Kind == kind &&
		blobkey.OfRunArtifact(a.BlobKey, r.OrganizationID, r.ID, kind) &&
		a.SizeBytes >= 0 && a.SizeBytes <= state.MaxStateBytes && len(a.SHA256) == sha256.Size
}

// OpenStateDownload releases a finalized state version's raw state, which
// holds sensitive values in clear, under the same rules plus state:read.
func (s *Service) OpenStateDownload(ctx context.Context, p access.Principal, versionID, reason string) (Download, error) {
	reason, err := s.authorizeDownload(p, DownloadState, reason)
	if err != nil {
		return Download{}, err
	}
	body, v, err := s.state.Download(ctx, p, versionID)
	if err != nil {
		return Download{}, missingBlob(err)
	}
	// authorizeDownload saw artifact:read_sensitive anywhere; a team's
	// admin grant on another workspace releases nothing in this one.
	if _, err := s.workspaces.WorkspaceWith(ctx, p, v.WorkspaceID, access.PermArtifactReadSensitive); err != nil {
		body.Close()
		return Download{}, err
	}
	if err := s.auditDownload(ctx, p, DownloadState, "state_version", v.ID, withReason(map[string]any{"workspace_id": v.WorkspaceID,
		"serial": v.Serial, "size_bytes": *v.Size, "sha256": HexDigest(v.SHA256)}, reason)); err != nil {
		body.Close()
		return Download{}, err
	}
	return Download{Body: body, Size: *v.Size, SHA256: v.SHA256, Name: v.ID + ".tfstate"}, nil
}

// auditDownload commits the download's audit record in its own
// transaction, so it exists before the first byte leaves, whatever happens
// to the stream.
func (s *Service) auditDownload(ctx context.Context, p access.Principal, kind, targetType, targetID string, evidence map[string]any) error {
	evidence["download"] = kind
	return db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		return audit.Record(ctx, tx, p, "artifact.sensitive_downloaded", targetType, targetID, evidence)
	})
}

// missingBlob makes an object that is gone, or whose sealed header does
// not open for the identity its record names, unavailable like a missing
// record.
func missingBlob(err error) error {
	if errors.Is(err, blob.ErrNotFound) || errors.Is(err, seal.ErrCorrupt) {
		return fault.ErrNotFound
	}
	return fmt.Errorf("opening restricted download: %w", err)
}
