package run

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/credential"
	"github.com/cairnhq/cairn/api/workspace"
)

// SourceVCS is the source of runs and configuration versions a code-host
// event created.
const SourceVCS = "vcs"

// CodeHostSource is what a code-host run pins of its source (SPEC §6, the
// canonical input snapshot): the settings version, the repository, the
// exact commit and ref, the pull request, whether it came from a fork
// (head repository other than the base), the user who planned a held fork
// pull request for its exact head commit (PlanApprovedBy; nil when the
// code host's event started the run by itself), and the immutable
// speculative credential decision. It is part of the input snapshot digest.
type CodeHostSource struct {
	Provider                       string   `json:"provider"`
	IngestionID                    string   `json:"source_ingestion_id"`
	DeliveryID                     string   `json:"delivery_id"`
	SettingsID                     string   `json:"source_settings_id"`
	SettingsVersion                int      `json:"source_settings_version"`
	InstallationID                 int64    `json:"installation_id"`
	RepositoryID                   int64    `json:"repository_id"`
	Owner                          string   `json:"owner"`
	Name                           string   `json:"name"`
	CommitSHA                      string   `json:"commit_sha"`
	Ref                            string   `json:"ref"`
	WorkingDirectory               string   `json:"working_directory"`
	TriggerPaths                   []string `json:"trigger_paths"`
	PullNumber                     *int     `json:"pull_request_number"`
	BaseRef                        *string  `json:"base_ref"`
	HeadRef                        *string  `json:"head_ref"`
	Fork                           bool     `json:"fork"`
	PlanApprovedBy                 *string  `json:"plan_approved_by"`
	SpeculativeCredentialVersionID *string  `json:"speculative_credential_version_id"`
	ConfigurationVersionID         string   `json:"configuration_version_id"`
	ArchiveSHA256                  string   `json:"archive_sha256"`
}

// RunID is the run's identity, derived from its source ingestion so a
// retried ingestion can never create a second run.
func (c CodeHostSource) RunID() string { return RunIDOf(c.IngestionID) }

// RunIDOf derives a code-host run's ID from its source ingestion's ID.
func RunIDOf(ingestionID string) string { return "run_" + strings.TrimPrefix(ingestionID, "sin_") }

// snapshotCredentials decides the credential versions a new run pins.
// Code-host speculative runs never take the workspace's profiles: a fork
// gets nothing, a same-repository pull request only the source's explicit
// speculative_plan version.
func (s *Service) snapshotCredentials(ctx context.Context, tx *sqlx.Tx, w workspace.Workspace, in CreateInput) ([]credential.Ref, string, error) {
	if in.CodeHost != nil && in.Kind == KindSpeculative {
		if in.CodeHost.Fork || in.CodeHost.SpeculativeCredentialVersionID == nil {
			return nil, "", nil
		}
		return credential.SnapshotSpeculativeVersion(ctx, tx, w.OrganizationID, w.ID, *in.CodeHost.SpeculativeCredentialVersionID)
	}
	return s.creds.SnapshotRun(ctx, tx, w.OrganizationID, w.ID, in.Kind == KindSpeculative)
}

// CodeHostSourceOf reads the source a run pinned, nil for uploaded runs.
func CodeHostSourceOf(r Run) *CodeHostSource { return codeHostSourceOf(r) }

func codeHostSourceOf(r Run) *CodeHostSource {
	var snap inputSnapshot
	if r.Source != SourceVCS || json.Unmarshal(r.InputSnapshot, &snap) != nil {
		return nil
	}
	return snap.Source
}
