package checkrun

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/platform/db"
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
	var workspaceName string
	if err := tx.GetContext(ctx, &workspaceName, `SELECT name FROM workspaces WHERE id = $1 AND organization_id = $2`,
		r.WorkspaceID, r.OrganizationID); err != nil {
		return fmt.Errorf("reading the run's workspace: %w", err)
	}
	// One check per workspace on a commit: several workspaces may track
	// the same repository.
	name := "Cairn: " + workspaceName
	if runes := []rune(name); len(runes) > maxNameChars {
		name = string(runes[:maxNameChars])
	}
	desired, digest, err := payloadOf(r, name, s.detailsURL(r.ID)).digest()
	if err != nil {
		return err
	}
	created, err := insertPublication(ctx, tx, publication{RunID: r.ID, OrganizationID: r.OrganizationID,
		InstallationID: t.InstallationID, RepositoryID: t.RepositoryID, RepositoryOwner: t.RepositoryOwner,
		RepositoryName: t.RepositoryName, HeadSHA: t.HeadSHA, CheckName: name, Desired: desired, DesiredDigest: digest})
	if err != nil {
		return err
	}
	if !created {
		p, err := publicationForUpdate(ctx, tx, r.ID)
		if err != nil {
			return err
		}
		if p == nil || p.OrganizationID != r.OrganizationID || p.target() != t {
			return ErrTargetConflict
		}
		return nil
	}
	return s.enqueue(ctx, tx, r.ID)
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
			s.logger.WarnContext(ctx, "code-host run without a publishable check target", "run_id", r.ID, "error", err)
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
	return s.enqueue(ctx, tx, r.ID)
}

func (s *Service) enqueue(ctx context.Context, tx *sqlx.Tx, runID string) error {
	if s.jobs == nil {
		return errors.New("check runs: no job inserter")
	}
	if _, err := s.jobs.InsertTx(ctx, tx.Tx, SyncArgs{RunID: runID}, nil); err != nil {
		return fmt.Errorf("inserting check run sync job: %w", err)
	}
	return nil
}

// Sync publishes a run's pending check payload. It returns ErrLeased when
// another sync holds the publication, and the provider's error (after
// recording it and releasing the lease) when a write failed; the
// publication then stays pending for a retry or the reconciler.
func (s *Service) Sync(ctx context.Context, runID string) error {
	token := newToken()
	var p *publication
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var err error
		if p, err = publicationForUpdate(ctx, tx, runID); err != nil || p == nil || !p.Pending {
			return err
		}
		if p.Leased {
			return ErrLeased
		}
		return claim(ctx, tx, runID, token, s.opts.Lease.Seconds())
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
		s.logger.WarnContext(ctx, "check run publication failed", "run_id", runID, "error_code", code, "error", err)
		if ferr := fail(context.WithoutCancel(ctx), s.db, runID, token, id, code); ferr != nil {
			return errors.Join(err, ferr)
		}
		return err
	}
	return db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		held, pending, err := settle(ctx, tx, runID, token, *id, p.DesiredDigest)
		if err != nil || !held || !pending {
			return err
		}
		// The run moved on while this sync wrote: one more sync.
		return s.enqueue(ctx, tx, runID)
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
		if created.GetID() <= 0 || created.GetExternalID() != p.RunID || created.GetHeadSHA() != p.HeadSHA {
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

// search looks through the commit's check runs of this check name, every
// bounded page, for the one whose external_id is the run ID.
func (s *Service) search(ctx context.Context, gh *github.Client, p publication) (*int64, error) {
	opts := &github.ListCheckRunsOptions{CheckName: github.String(p.CheckName), Filter: github.String("all"),
		ListOptions: github.ListOptions{PerPage: searchPageSize, Page: 1}}
	for range s.opts.SearchPages {
		res, resp, err := gh.Checks.ListCheckRunsForRef(ctx, p.RepositoryOwner, p.RepositoryName, p.HeadSHA, opts)
		if err != nil {
			return nil, err
		}
		for _, c := range res.CheckRuns {
			if c.GetExternalID() == p.RunID && c.GetHeadSHA() == p.HeadSHA && c.GetID() > 0 {
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
		ExternalID: github.String(p.RunID), Status: github.String(want.Status),
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
func failureCode(err error) string {
	var ge *github.ErrorResponse
	switch {
	case errors.As(err, &ge) && ge.Response != nil:
		return fmt.Sprintf("provider_status_%d", ge.Response.StatusCode)
	case errors.Is(err, ErrProviderAnswer):
		return "provider_answer_invalid"
	case errors.Is(err, ErrNoProvider):
		return "provider_not_configured"
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
