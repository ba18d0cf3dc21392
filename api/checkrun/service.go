package checkrun

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/telemetry"
	"github.com/cairnhq/cairn/api/run"
)

// Clients returns a code-host API client authenticated as the app's
// installation (its token never leaves the client).
type Clients func(ctx context.Context, installationID int64) (*github.Client, error)

// Options tune the service.
type Options struct {
	// DashboardURL is the dashboard origin the check's details link to.
	DashboardURL string
	// Clients reaches the code host; nil leaves every sync failing closed
	// with ErrNoProvider (the publication stays pending).
	Clients Clients
	// Lease bounds how long one sync owns a publication; the sync's
	// provider calls get two thirds of it.
	Lease time.Duration
	// Backoff is how much longer the reconciler waits per consecutive
	// failure of a publication (at most ten steps).
	Backoff time.Duration
	// SearchPages bounds the pages of the commit's check runs read to find
	// a check whose create answer was lost.
	SearchPages int
	// AppID is the code-host app's ID as the provider reports it on each
	// check run: the search after a lost create matches only this app's
	// checks. Unknown (0), the search finds nothing it may patch and fails.
	AppID int64
}

// Defaults.
const (
	DefaultLease       = 30 * time.Second
	DefaultBackoff     = 30 * time.Second
	DefaultSearchPages = 10
	searchPageSize     = 100
	reconcileBatch     = 100
)

// Service records check targets, derives their payloads in run
// transactions and publishes them.
type Service struct {
	db     *sqlx.DB
	jobs   run.JobInserter
	logger *slog.Logger
	opts   Options
}

// NewService returns the check-run service.
func NewService(conn *sqlx.DB, jobs run.JobInserter, logger *slog.Logger, opts Options) *Service {
	if opts.Lease <= 0 {
		opts.Lease = DefaultLease
	}
	if opts.Backoff <= 0 {
		opts.Backoff = DefaultBackoff
	}
	if opts.SearchPages <= 0 {
		opts.SearchPages = DefaultSearchPages
	}
	opts.DashboardURL = strings.TrimRight(opts.DashboardURL, "/")
	return &Service{db: conn, jobs: jobs, logger: logger, opts: opts}
}

func (s *Service) detailsURL(runID string) string { return s.opts.DashboardURL + "/runs/" + runID }

// HeldDetailsURL is the dashboard page of a held pull request, where a
// person can plan its exact head commit.
func (s *Service) HeldDetailsURL(workspaceID, ingestionID string) string {
	return s.opts.DashboardURL + "/workspaces/" + url.PathEscape(workspaceID) + "/pull-requests/" + url.PathEscape(ingestionID)
}

// maxNameChars bounds a check name (the column allows 200).
const maxNameChars = 120

// Track reserves the check run publication of a code-host run, in the
// transaction that created the run, and queues its first sync. Tracking a
// run again with the same target is a no-op; with another target it is
// ErrTargetConflict.
func (s *Service) Track(ctx context.Context, tx *sqlx.Tx, r run.Run, t Target) error {
	if err := t.validate(); err != nil {
		return err
	}
	name, err := checkName(ctx, tx, r.OrganizationID, r.WorkspaceID)
	if err != nil {
		return err
	}
	runID := r.ID
	return s.reserve(ctx, tx, publication{ExternalID: r.ID, RunID: &runID, OrganizationID: r.OrganizationID}, t, name,
		payloadOf(r, name, s.detailsURL(r.ID)))
}

// Held is a source ingestion held before any run exists (a pull request
// from a fork): its check says why and where a person can plan it.
type Held struct {
	IngestionID    string
	OrganizationID string
	WorkspaceID    string
	// Title and Summary are the check's words (safe text the caller
	// composed: reason codes and identifiers, nothing a user wrote); the
	// summary is followed by the link to the held ingestion's page.
	Title   string
	Summary string
	// HeldAt is when the ingestion was held: the check's completion time.
	HeldAt time.Time
}

// TrackHeld reserves the neutral check run of a held ingestion, in the
// transaction that holds it, and queues its sync. Its external_id is the
// ingestion's ID; a run the ingestion becomes later gets a check of its
// own, and this one stays as it is. Tracking it again with the same
// target is a no-op; with another target it is ErrTargetConflict.
func (s *Service) TrackHeld(ctx context.Context, tx *sqlx.Tx, h Held, t Target) error {
	if err := t.validate(); err != nil {
		return err
	}
	name, err := checkName(ctx, tx, h.OrganizationID, h.WorkspaceID)
	if err != nil {
		return err
	}
	ingestionID := h.IngestionID
	return s.reserve(ctx, tx, publication{ExternalID: h.IngestionID, IngestionID: &ingestionID, OrganizationID: h.OrganizationID},
		t, name, heldPayloadOf(h, name, s.HeldDetailsURL(h.WorkspaceID, h.IngestionID)))
}

// reserve inserts a publication of want on t and queues its first sync; an
// existing one must name the same organization and target.
func (s *Service) reserve(ctx context.Context, tx *sqlx.Tx, p publication, t Target, name string, want Payload) error {
	desired, digest, err := want.digest()
	if err != nil {
		return err
	}
	p.InstallationID, p.RepositoryID, p.RepositoryOwner, p.RepositoryName, p.HeadSHA = t.InstallationID, t.RepositoryID,
		t.RepositoryOwner, t.RepositoryName, t.HeadSHA
	p.CheckName, p.Desired, p.DesiredDigest = name, desired, digest
	created, err := insertPublication(ctx, tx, p)
	if err != nil {
		return err
	}
	if !created {
		existing, err := publicationForUpdate(ctx, tx, p.ExternalID)
		if err != nil {
			return err
		}
		if existing == nil || existing.OrganizationID != p.OrganizationID || existing.target() != t {
			return ErrTargetConflict
		}
		return nil
	}
	return s.enqueue(ctx, tx, p.syncArgs())
}

// checkName names a workspace's checks: one per workspace on a commit,
// since several workspaces may track the same repository.
func checkName(ctx context.Context, tx *sqlx.Tx, organizationID, workspaceID string) (string, error) {
	var workspaceName string
	if err := tx.GetContext(ctx, &workspaceName, `SELECT name FROM workspaces WHERE id = $1 AND organization_id = $2`,
		workspaceID, organizationID); err != nil {
		return "", fmt.Errorf("reading the check's workspace: %w", err)
	}
	name := "Cairn: " + workspaceName
	if runes := []rune(name); len(runes) > maxNameChars {
		name = string(runes[:maxNameChars])
	}
	return name, nil
}

// RunSaved implements run.Observer: the first write of a code-host run
// reserves its publication (Track); a later write that changes what its
// check should say marks the publication pending and queues a sync, in the
// run's transaction. Other runs cost one indexed read.
func (s *Service) RunSaved(ctx context.Context, tx *sqlx.Tx, r run.Run) error {
	p, err := publicationForUpdate(ctx, tx, r.ID)
	if err != nil {
		return err
	}
	if p == nil {
		// A code-host run carries its commit in its input snapshot: its
		// first write reserves the publication.
		src := run.CodeHostSourceOf(r)
		if src == nil {
			return nil
		}
		t := Target{InstallationID: src.InstallationID, RepositoryID: src.RepositoryID,
			RepositoryOwner: src.Owner, RepositoryName: src.Name, HeadSHA: src.CommitSHA}
		if err := t.validate(); err != nil {
			// The check is a side effect: a source it cannot name never
			// stops the run itself.
			// Only the run's ID and a fixed reason leave: the error text
			// names the repository (SPEC §6 telemetry boundary).
			s.failed(ctx, r.ID, "target_invalid")
			return nil
		}
		return s.Track(ctx, tx, r, t)
	}
	desired, digest, err := payloadOf(r, p.CheckName, s.detailsURL(r.ID)).digest()
	if err != nil {
		return err
	}
	if string(digest) == string(p.DesiredDigest) {
		return nil
	}
	pending, err := setDesired(ctx, tx, r.ID, desired, digest)
	if err != nil || !pending {
		return err
	}
	return s.enqueue(ctx, tx, p.syncArgs())
}

func (s *Service) enqueue(ctx context.Context, tx *sqlx.Tx, args SyncArgs) error {
	if s.jobs == nil {
		return errors.New("check runs: no job inserter")
	}
	if _, err := s.jobs.InsertTx(ctx, tx.Tx, args, nil); err != nil {
		return fmt.Errorf("inserting check run sync job: %w", err)
	}
	return nil
}

// Sync publishes the pending check payload of a run or held ingestion (by
// its external ID, the owner's ID). It returns ErrLeased when
// another sync holds the publication, and the provider's error (after
// recording it and releasing the lease) when a write failed; the
// publication then stays pending for a retry or the reconciler.
func (s *Service) Sync(ctx context.Context, externalID string) error {
	token := newToken()
	var p *publication
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var err error
		if p, err = publicationForUpdate(ctx, tx, externalID); err != nil || p == nil || !p.Pending {
			return err
		}
		if p.Leased {
			return ErrLeased
		}
		return claim(ctx, tx, externalID, token, s.opts.Lease.Seconds())
	})
	if err != nil || p == nil || !p.Pending {
		return err
	}
	// Every provider call ends well inside the lease, so no other sync can
	// take the publication while a create of this one is in flight.
	pctx, cancel := context.WithTimeout(ctx, s.opts.Lease*2/3)
	id, err := s.publish(pctx, *p)
	cancel()
	if err != nil {
		code := failureCode(err)
		s.failed(ctx, externalID, code)
		if ferr := fail(context.WithoutCancel(ctx), s.db, externalID, token, id, code); ferr != nil {
			return errors.Join(err, ferr)
		}
		return err
	}
	return db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		held, pending, err := settle(ctx, tx, externalID, token, *id, p.DesiredDigest)
		if err != nil || !held || !pending {
			return err
		}
		// The run moved on while this sync wrote: one more sync.
		return s.enqueue(ctx, tx, p.syncArgs())
	})
}

// publish writes the payload: a patch of the known check, or of the one a
// search finds after an earlier create whose answer may have been lost, or
// else a create. It returns the verified check run ID, also when a later
// step failed (nil when none is known).
func (s *Service) publish(ctx context.Context, p publication) (*int64, error) {
	var want Payload
	if err := json.Unmarshal(p.Desired, &want); err != nil {
		return p.CheckRunID, fmt.Errorf("decoding stored check payload: %w", err)
	}
	if s.opts.Clients == nil {
		return p.CheckRunID, ErrNoProvider
	}
	gh, err := s.opts.Clients(ctx, p.InstallationID)
	if err != nil {
		return p.CheckRunID, err
	}
	id := p.CheckRunID
	if id == nil && p.CreateSent {
		if id, err = s.search(ctx, gh, p); err != nil {
			return nil, err
		}
	}
	if id == nil {
		created, _, err := gh.Checks.CreateCheckRun(ctx, p.RepositoryOwner, p.RepositoryName, createOptions(p, want))
		if err != nil {
			return nil, err
		}
		if created.GetID() <= 0 || created.GetExternalID() != p.ExternalID || created.GetHeadSHA() != p.HeadSHA {
			return nil, ErrProviderAnswer
		}
		v := created.GetID()
		return &v, nil
	}
	updated, _, err := gh.Checks.UpdateCheckRun(ctx, p.RepositoryOwner, p.RepositoryName, *id, updateOptions(p, want))
	if err != nil {
		return id, err
	}
	if updated.GetID() != *id {
		return id, ErrProviderAnswer
	}
	return id, nil
}

// search looks through the commit's check runs of this app and check name,
// every bounded page, for the one whose external_id is the publication's.
// Another app's check with the same name and external_id (anyone may
// write one) is never taken for ours.
func (s *Service) search(ctx context.Context, gh *github.Client, p publication) (*int64, error) {
	if s.opts.AppID <= 0 {
		return nil, ErrNoAppID
	}
	opts := &github.ListCheckRunsOptions{CheckName: github.String(p.CheckName), Filter: github.String("all"),
		AppID: github.Int64(s.opts.AppID), ListOptions: github.ListOptions{PerPage: searchPageSize, Page: 1}}
	for range s.opts.SearchPages {
		res, resp, err := gh.Checks.ListCheckRunsForRef(ctx, p.RepositoryOwner, p.RepositoryName, p.HeadSHA, opts)
		if err != nil {
			return nil, err
		}
		for _, c := range res.CheckRuns {
			if c.GetExternalID() == p.ExternalID && c.GetHeadSHA() == p.HeadSHA && c.GetID() > 0 &&
				c.GetApp().GetID() == s.opts.AppID {
				id := c.GetID()
				return &id, nil
			}
		}
		if resp.NextPage == 0 {
			return nil, nil
		}
		opts.Page = resp.NextPage
	}
	// Creating now could duplicate a check beyond the pages read.
	return nil, errors.New("check run search exceeded its page bound")
}

func createOptions(p publication, want Payload) github.CreateCheckRunOptions {
	o := github.CreateCheckRunOptions{Name: want.Name, HeadSHA: p.HeadSHA, DetailsURL: github.String(want.DetailsURL),
		ExternalID: github.String(p.ExternalID), Status: github.String(want.Status),
		Output: &github.CheckRunOutput{Title: github.String(want.Title), Summary: github.String(want.Summary)}}
	if want.Conclusion != "" {
		o.Conclusion = github.String(want.Conclusion)
	}
	if want.StartedAt != nil {
		o.StartedAt = &github.Timestamp{Time: *want.StartedAt}
	}
	if want.CompletedAt != nil {
		o.CompletedAt = &github.Timestamp{Time: *want.CompletedAt}
	}
	return o
}

func updateOptions(p publication, want Payload) github.UpdateCheckRunOptions {
	c := createOptions(p, want)
	return github.UpdateCheckRunOptions{Name: c.Name, DetailsURL: c.DetailsURL, ExternalID: c.ExternalID, Status: c.Status,
		Conclusion: c.Conclusion, CompletedAt: c.CompletedAt, Output: c.Output}
}

// failureCode is the safe, bounded code recorded for a failed sync.
// failed reports a check run that could not be published as the
// check_run_publication_failed event: the owner's opaque ID (a run or a
// held ingestion) and a failure code, through the telemetry boundary. The
// provider's error text never leaves: it can carry repository URLs and
// names.
func (s *Service) failed(ctx context.Context, externalID, code string) {
	_ = telemetry.Emit(ctx, s.logger, telemetry.Event{Name: "check_run_publication_failed", Fields: map[string]telemetry.Value{
		"external_id": telemetry.ID(externalID),
		"code":        telemetry.Enum(code, failureCodes...),
	}})
}

// failureCodes are every code failureCode gives, and target_invalid.
var failureCodes = func() []string {
	codes := []string{"target_invalid", "provider_answer_invalid", "provider_not_configured", "provider_app_unknown",
		"provider_timeout", "provider_unreachable"}
	for status := 300; status < 600; status++ {
		codes = append(codes, fmt.Sprintf("provider_status_%d", status))
	}
	return codes
}()

func failureCode(err error) string {
	var ge *github.ErrorResponse
	switch {
	case errors.As(err, &ge) && ge.Response != nil:
		return fmt.Sprintf("provider_status_%d", ge.Response.StatusCode)
	case errors.Is(err, ErrProviderAnswer):
		return "provider_answer_invalid"
	case errors.Is(err, ErrNoProvider):
		return "provider_not_configured"
	case errors.Is(err, ErrNoAppID):
		return "provider_app_unknown"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "provider_timeout"
	default:
		return "provider_unreachable"
	}
}

// Reconcile syncs every pending publication whose lease and backoff have
// passed: the replay of side effects a lost job or a provider outage left.
func (s *Service) Reconcile(ctx context.Context) (synced, failed int, err error) {
	ids, err := duePublications(ctx, s.db, s.opts.Backoff.Seconds(), reconcileBatch)
	if err != nil {
		return 0, 0, err
	}
	for _, id := range ids {
		if err := s.Sync(ctx, id); err != nil {
			if errors.Is(err, ErrLeased) {
				continue
			}
			failed++
			continue
		}
		synced++
	}
	return synced, failed, nil
}

func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
