package github

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	gh "github.com/google/go-github/v66/github"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/archive"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/dispatch"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/run"
)

// Failure codes of an ingestion that can never succeed.
const (
	codeCommitUnavailable = "commit_unavailable"
	codeCommitMismatch    = "commit_mismatch"
	codeArchivePrefix     = "archive_"
	codeWorkingDirectory  = "working_directory_missing"
)

// errPermanent marks a failure retrying cannot fix.
type errPermanent struct{ code string }

func (e errPermanent) Error() string { return "source ingestion failed: " + e.code }

// Ingest runs one source ingestion to its end: outside any transaction it
// reads the pull request's changed files (path filtering), holds a fork's
// pull request that no person approved unless the workspace plans forks
// (and then too once the repository met its hourly fork-run throttle),
// resolves the full commit, downloads exactly that commit's archive
// through a fresh installation token, validates it with the upload rules
// while streaming it into sealed storage; then in one transaction it
// marks the ingestion ready with the archive digest and creates the run.
// A settled or held ingestion makes this a no-op; a temporary provider
// failure is returned for retry.
func (s *Service) Ingest(ctx context.Context, ingestionID string) error {
	ing, err := ingestionByID(ctx, s.db, ingestionID, false)
	if err != nil {
		return err
	}
	if ing.Status != IngestionPending {
		return nil
	}
	if !s.app.Ready() {
		return fmt.Errorf("%w: %w", fault.ErrUnavailable, ErrUnconfigured)
	}
	settings, err := settingsByID(ctx, s.db, ing.SourceSettingsID)
	if err != nil {
		return err
	}
	if ing.Trigger == TriggerPullRequest && len(settings.TriggerPaths) > 0 {
		paths, complete, err := s.app.PullFiles(ctx, ing.InstallationID, ing.RepositoryOwner, ing.RepositoryName, *ing.PullNumber)
		if err != nil {
			return err
		}
		if complete && !MatchAny(settings.TriggerPaths, paths) {
			return s.settleIngestion(ctx, ing.ID, IngestionSkipped, "no_trigger_path_matched")
		}
	}
	// Nothing of a held fork is downloaded. The throttle is read here to
	// spare the download, and decided again where the run is created.
	if ing.mustHold(settings) {
		return s.hold(ctx, ing.ID, HeldForkPullRequest)
	}
	if over, err := s.forkRunsOver(ctx, s.db, ing); err != nil || over {
		if err != nil {
			return err
		}
		return s.hold(ctx, ing.ID, HeldForkRunsThrottled)
	}
	sha, message, err := s.app.Commit(ctx, ing.InstallationID, ing.RepositoryOwner, ing.RepositoryName, ing.HeadSHA)
	if err != nil {
		if isClientError(err) {
			return s.settleIngestion(ctx, ing.ID, IngestionFailed, codeCommitUnavailable)
		}
		return err
	}
	if sha != ing.HeadSHA {
		return s.settleIngestion(ctx, ing.ID, IngestionFailed, codeCommitMismatch)
	}
	staged, err := s.stage(ctx, ing, settings, sha)
	var perm errPermanent
	if errors.As(err, &perm) {
		return s.settleIngestion(ctx, ing.ID, IngestionFailed, perm.code)
	}
	if err != nil {
		return err
	}
	err = s.complete(ctx, ing.ID, settings, sha, message, staged)
	if err != nil {
		s.runs.DiscardStaged(ctx, staged)
	}
	return err
}

// isClientError reports a provider answer that retrying cannot change:
// the commit does not exist (any more) or is not reachable.
func isClientError(err error) bool {
	var re *gh.ErrorResponse
	return errors.As(err, &re) && re.Response != nil &&
		(re.Response.StatusCode == http.StatusNotFound || re.Response.StatusCode == http.StatusUnprocessableEntity)
}

// stage downloads the commit's archive and seals its working directory as
// a normalized archive. The provider's archive itself is validated with the
// same rules as uploads, in the same single pass.
func (s *Service) stage(ctx context.Context, ing Ingestion, st SourceSettings, sha string) (run.StagedArchive, error) {
	body, declared, err := s.app.Tarball(ctx, ing.InstallationID, ing.RepositoryOwner, ing.RepositoryName, sha)
	if err != nil {
		return run.StagedArchive{}, err
	}
	defer body.Close()
	if declared > run.MaxArchiveBytes {
		return run.StagedArchive{}, errPermanent{codeArchivePrefix + "too_large"}
	}
	// The original goes through archive.Inspect while repack reads it.
	ipr, ipw := io.Pipe()
	inspected := make(chan error, 1)
	go func() {
		_, err := archive.Inspect(ctx, ipr, archive.Limits{MaxCompressedBytes: run.MaxArchiveBytes})
		if err == nil {
			_, err = io.Copy(io.Discard, ipr)
		}
		ipr.CloseWithError(errors.Join(err, io.ErrClosedPipe))
		inspected <- err
	}()
	src := io.TeeReader(body, ipw)
	rpr, rpw := io.Pipe()
	repacked := make(chan error, 1)
	go func() {
		err := repack(src, rpw, st.WorkingDirectory)
		if err == nil {
			_, err = io.Copy(io.Discard, src) // the trailer, so Inspect sees the whole stream
		}
		ipw.CloseWithError(err)
		rpw.CloseWithError(err)
		repacked <- err
	}()
	staged, stageErr := s.runs.StageArchive(ctx, ing.OrganizationID, rpr)
	rpr.CloseWithError(io.ErrClosedPipe)
	repackErr := <-repacked
	inspectErr := <-inspected
	for _, e := range []error{inspectErr, stageErr} {
		if code := archive.CodeOf(e); code != "" {
			if stageErr == nil {
				s.runs.DiscardStaged(ctx, staged)
			}
			return run.StagedArchive{}, errPermanent{codeArchivePrefix + strings.TrimPrefix(code, "archive_")}
		}
	}
	var arcErr run.ArchiveError
	if errors.As(stageErr, &arcErr) {
		return run.StagedArchive{}, errPermanent{codeArchivePrefix + strings.TrimPrefix(arcErr.Code, "archive_")}
	}
	if errors.Is(repackErr, errNoWorkingDirectory) {
		if stageErr == nil {
			s.runs.DiscardStaged(ctx, staged)
		}
		return run.StagedArchive{}, errPermanent{codeWorkingDirectory}
	}
	if err := errors.Join(stageErr, inspectErr, repackErr); err != nil {
		if stageErr == nil {
			s.runs.DiscardStaged(ctx, staged)
		}
		return run.StagedArchive{}, err
	}
	return staged, nil
}

var errNoWorkingDirectory = errors.New("working directory has no files in the commit")

// repack rewrites a provider archive (one top-level "owner-repo-sha/"
// directory) as the archive of the working directory alone, rooted at it.
// It reads as it writes; validation is Inspect's and StageArchive's.
func repack(r io.Reader, w io.Writer, workingDirectory string) error {
	return RepackDirectory(r, w, workingDirectory, false)
}

// ErrDirectoryMissing: the directory has no files in the commit.
var ErrDirectoryMissing = errNoWorkingDirectory

// RepackDirectory rewrites a provider archive (one top-level
// "owner-repo-sha/" directory) as the archive of one directory alone,
// rooted at it, reading as it writes. Names are carried over as they are
// (a traversing name stays one), so whoever validates the result refuses
// what the rules refuse. With keepOthers, links and special entries are
// carried over too, for the validation of the result to refuse; without
// it they are dropped (the caller validates the original).
func RepackDirectory(r io.Reader, w io.Writer, directory string, keepOthers bool) error {
	workingDirectory := directory
	gz, err := gzip.NewReader(r)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	prefix := ""
	if workingDirectory != "" {
		prefix = workingDirectory + "/"
	}
	files := 0
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		_, rest, ok := strings.Cut(hdr.Name, "/")
		if !ok {
			continue
		}
		rel, ok := strings.CutPrefix(rest, prefix)
		if !ok || rel == "" {
			continue
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: rel, Mode: 0o755, ModTime: hdr.ModTime})
		case tar.TypeReg:
			mode := int64(0o644)
			if hdr.Mode&0o111 != 0 {
				mode = 0o755
			}
			if err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: mode, Size: hdr.Size,
				ModTime: hdr.ModTime}); err == nil {
				_, err = io.Copy(tw, tr)
			}
			files++
		default:
			if !keepOthers {
				// Links and special entries are refused by Inspect on the
				// original; nothing of them is carried over.
				continue
			}
			err = tw.WriteHeader(&tar.Header{Typeflag: hdr.Typeflag, Name: rel, Linkname: hdr.Linkname, Mode: hdr.Mode,
				ModTime: hdr.ModTime})
			files++
		}
		if err != nil {
			return err
		}
	}
	if files == 0 {
		return errNoWorkingDirectory
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// settleIngestion ends an ingestion that creates no run.
func (s *Service) settleIngestion(ctx context.Context, ingestionID, status, code string) error {
	return db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		ing, err := ingestionByID(ctx, tx, ingestionID, true)
		if err != nil || ing.Status != IngestionPending {
			return err
		}
		now := s.stamp()
		ing.Status, ing.SettledAt = status, &now
		if status == IngestionFailed {
			ing.FailureCode = &code
		}
		if err := saveIngestion(ctx, tx, ing); err != nil {
			return err
		}
		if err := dispatch.Complete(ctx, tx, ing.WorkflowID(), now); err != nil {
			return err
		}
		_, err = audit.Append(ctx, tx, audit.Entry{OrganizationID: ing.OrganizationID, Action: "source_ingestion." + status,
			Actor: audit.Actor{Type: audit.ActorSystem, ID: "github-app"}, TargetType: "source_ingestion", TargetID: ing.ID,
			Evidence: map[string]any{"workspace_id": ing.WorkspaceID, "reason": code}})
		return err
	})
}

// complete marks the ingestion ready with its verified archive and creates
// its run, in one transaction. The run's identity derives from the
// ingestion, so a retry after a lost commit finds it instead of making
// another.
func (s *Service) complete(ctx context.Context, ingestionID string, st SourceSettings, sha, message string, staged run.StagedArchive) error {
	return db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		ing, err := ingestionByID(ctx, tx, ingestionID, true)
		if err != nil {
			return err
		}
		if ing.Status != IngestionPending {
			s.runs.DiscardStaged(ctx, staged)
			return nil
		}
		// The fork-run throttle is decided here, serialized per repository
		// in the transaction that creates the run, so concurrent
		// ingestions cannot pass it together.
		if ing.Fork && ing.PlanApprovedBy == nil {
			if err := lockForkRuns(ctx, tx, ing.RepositoryID); err != nil {
				return err
			}
			over, err := s.forkRunsOver(ctx, tx, ing)
			if err != nil {
				return err
			}
			if over {
				s.runs.DiscardStaged(ctx, staged)
				return s.holdInTx(ctx, tx, ing, HeldForkRunsThrottled)
			}
		}
		p := access.CodeHost(ing.OrganizationID)
		cv, err := s.runs.CreateStagedConfiguration(ctx, tx, p, ing.WorkspaceID, staged, run.SourceVCS)
		if err != nil {
			return err
		}
		deliveryID, err := firstDelivery(ctx, tx, ing.ID)
		if err != nil {
			return err
		}
		now := s.stamp()
		msg := truncateRunes(strings.TrimSpace(message), 2000)
		ing.Status, ing.CommitSHA, ing.CommitMessage, ing.SettledAt = IngestionReady, &sha, &msg, &now
		ing.ConfigurationVersionID, ing.ArchiveSHA256 = &cv.ID, cv.SHA256
		src := &run.CodeHostSource{
			Provider: "github", IngestionID: ing.ID, DeliveryID: deliveryID, SettingsID: st.ID,
			SettingsVersion: st.Version, InstallationID: ing.InstallationID, RepositoryID: ing.RepositoryID,
			Owner: ing.RepositoryOwner, Name: ing.RepositoryName, CommitSHA: sha, Ref: ing.Ref,
			WorkingDirectory: st.WorkingDirectory, TriggerPaths: st.TriggerPaths, PullNumber: ing.PullNumber,
			BaseRef: ing.BaseRef, HeadRef: ing.HeadRef, Fork: ing.Fork, PlanApprovedBy: ing.PlanApprovedBy,
			ConfigurationVersionID: cv.ID, ArchiveSHA256: hex.EncodeToString(cv.SHA256),
		}
		kind := run.KindPlanAndApply
		runMessage := fmt.Sprintf("Push %s to %s", sha[:7], strings.TrimPrefix(ing.Ref, "refs/heads/"))
		if ing.Trigger == TriggerPullRequest {
			kind = run.KindSpeculative
			runMessage = fmt.Sprintf("Pull request #%d at %s", *ing.PullNumber, sha[:7])
			if !ing.Fork {
				src.SpeculativeCredentialVersionID = st.SpeculativeCredentialVersionID
			}
		}
		// The run row must exist before the ingestion names it.
		r, err := s.runs.CreateRun(ctx, tx, p, run.CreateInput{WorkspaceID: ing.WorkspaceID, ConfigurationVersionID: cv.ID,
			Kind: kind, Message: runMessage, Source: run.SourceVCS, CodeHost: src})
		if err != nil {
			return err
		}
		ing.RunID = &r.ID
		if err := saveIngestion(ctx, tx, ing); err != nil {
			return err
		}
		if err := dispatch.Complete(ctx, tx, ing.WorkflowID(), now); err != nil {
			return err
		}
		_, err = audit.Append(ctx, tx, audit.Entry{OrganizationID: ing.OrganizationID, Action: "source_ingestion.ready",
			Actor: audit.Actor{Type: audit.ActorSystem, ID: "github-app"}, TargetType: "source_ingestion", TargetID: ing.ID,
			Evidence: map[string]any{"workspace_id": ing.WorkspaceID, "run_id": r.ID, "commit_sha": sha,
				"configuration_version_id": cv.ID, "archive_sha256": hex.EncodeToString(cv.SHA256)}})
		return err
	})
}

func truncateRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}
