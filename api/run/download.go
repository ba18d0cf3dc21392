package run

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/platform/blob"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
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

// Download is an opened restricted download: the caller streams Body
// (exactly Size bytes) and closes it. The audit record is already
// committed.
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
// and a recent step-up: the audit record is committed first, then the
// sealed object is opened for streaming. Another organization's run, or
// one without the artifact, is not found.
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
	a, err := artifactOf(ctx, s.db, r.ID, kind)
	if errors.Is(err, ErrArtifactUnavailable) {
		return Download{}, fault.ErrNotFound
	}
	if err != nil {
		return Download{}, err
	}
	if err := s.auditDownload(ctx, p, kind, "run", r.ID, map[string]any{"artifact_id": a.ID,
		"workspace_id": r.WorkspaceID, "size_bytes": a.SizeBytes, "sha256": HexDigest(a.SHA256)}, reason); err != nil {
		return Download{}, err
	}
	body, err := s.openArtifactRow(ctx, a)
	if err != nil {
		return Download{}, missingBlob(err)
	}
	name := map[string]string{DownloadPlanFile: ".tfplan", DownloadPlanJSON: ".plan.json", DownloadEmergencyState: ".emergency.tfstate"}[kind]
	return Download{Body: body, Size: a.SizeBytes, SHA256: a.SHA256, Name: r.ID + name}, nil
}

// OpenStateDownload releases a finalized state version's raw state, which
// holds sensitive values in clear, under the same rules plus state:read.
func (s *Service) OpenStateDownload(ctx context.Context, p access.Principal, versionID, reason string) (Download, error) {
	reason, err := s.authorizeDownload(p, DownloadState, reason)
	if err != nil {
		return Download{}, err
	}
	v, err := s.state.Get(ctx, p, versionID)
	if err != nil {
		return Download{}, err
	}
	if !v.Finalized() || v.Size == nil {
		return Download{}, fault.ErrNotFound
	}
	if err := s.auditDownload(ctx, p, DownloadState, "state_version", v.ID, map[string]any{"workspace_id": v.WorkspaceID,
		"serial": v.Serial, "size_bytes": *v.Size, "sha256": HexDigest(v.SHA256)}, reason); err != nil {
		return Download{}, err
	}
	body, opened, err := s.state.Download(ctx, p, v.ID)
	if err != nil {
		return Download{}, missingBlob(err)
	}
	return Download{Body: body, Size: *opened.Size, SHA256: opened.SHA256, Name: v.ID + ".tfstate"}, nil
}

// auditDownload commits the download's audit record in its own
// transaction, so it exists before the first byte leaves, whatever happens
// to the stream.
func (s *Service) auditDownload(ctx context.Context, p access.Principal, kind, targetType, targetID string, evidence map[string]any, reason string) error {
	evidence["download"] = kind
	return db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		return audit.Record(ctx, tx, p, "artifact.sensitive_downloaded", targetType, targetID, withReason(evidence, reason))
	})
}

func missingBlob(err error) error {
	if errors.Is(err, blob.ErrNotFound) {
		return fault.ErrNotFound
	}
	return fmt.Errorf("opening restricted download: %w", err)
}
