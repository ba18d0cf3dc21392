package github

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/dispatch"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
)

// Headers are the provider's delivery headers.
type Headers struct {
	DeliveryID string
	Event      string
	Signature  string
}

// DeliveryResult is what the receiver answers; a replay answers the
// recorded one.
type DeliveryResult struct {
	Delivery Delivery
	Replayed bool
}

// envelope is the part of every payload that identifies it.
type envelope struct {
	Action       *string `json:"action"`
	Installation *struct {
		ID int64 `json:"id"`
	} `json:"installation"`
	Repository *struct {
		ID int64 `json:"id"`
	} `json:"repository"`
}

// pushMaxCommits is the provider's cap on a push payload's commit list: a
// list this long may be incomplete.
const pushMaxCommits = 2048

type pushPayload struct {
	Ref     string `json:"ref"`
	Before  string `json:"before"`
	After   string `json:"after"`
	Created bool   `json:"created"`
	Deleted bool   `json:"deleted"`
	Forced  bool   `json:"forced"`
	Commits []struct {
		Added    []string `json:"added"`
		Removed  []string `json:"removed"`
		Modified []string `json:"modified"`
	} `json:"commits"`
	Repository struct {
		ID    int64  `json:"id"`
		Name  string `json:"name"`
		Owner struct {
			Login string `json:"login"`
			Name  string `json:"name"`
		} `json:"owner"`
	} `json:"repository"`
}

type pullPayload struct {
	Action      string `json:"action"`
	Number      int    `json:"number"`
	PullRequest struct {
		State string `json:"state"`
		Head  struct {
			Ref  string `json:"ref"`
			SHA  string `json:"sha"`
			Repo *struct {
				ID    int64  `json:"id"`
				Name  string `json:"name"`
				Owner struct {
					Login string `json:"login"`
				} `json:"owner"`
			} `json:"repo"`
		} `json:"head"`
		Base struct {
			Ref  string `json:"ref"`
			Repo *struct {
				ID int64 `json:"id"`
			} `json:"repo"`
		} `json:"base"`
	} `json:"pull_request"`
	Repository struct {
		ID    int64  `json:"id"`
		Name  string `json:"name"`
		Owner struct {
			Login string `json:"login"`
		} `json:"owner"`
	} `json:"repository"`
}

// pullTriggers are the pull-request actions that plan the head commit.
var pullTriggers = []string{"opened", "synchronize", "reopened", "ready_for_review"}

// Receive handles one delivery: signature over the raw bytes first, then
// the replay identity, then what the event means. Nothing is parsed
// before the signature verifies.
func (s *Service) Receive(ctx context.Context, h Headers, body []byte) (DeliveryResult, error) {
	if !s.app.Ready() {
		return DeliveryResult{}, fmt.Errorf("%w: %w", fault.ErrUnavailable, ErrUnconfigured)
	}
	if err := s.app.VerifySignature(h.Signature, body); err != nil {
		return DeliveryResult{}, err
	}
	if !printable(h.DeliveryID, 100) || !printable(h.Event, 100) {
		return DeliveryResult{}, fmt.Errorf("%w: delivery ID and event headers are required", ErrInvalid)
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return DeliveryResult{}, fmt.Errorf("%w: the delivery is not a JSON object", ErrInvalid)
	}
	digest := sha256.Sum256(body)
	d := Delivery{DeliveryID: h.DeliveryID, Kind: kindOf(h.Event), Event: h.Event, Action: env.Action,
		PayloadSHA256: digest[:], IngestionIDs: pq.StringArray{}}
	if env.Action != nil && !printable(*env.Action, 100) {
		return DeliveryResult{}, fmt.Errorf("%w: action is not a bounded string", ErrInvalid)
	}
	if env.Installation != nil && env.Installation.ID > 0 {
		d.InstallationID = &env.Installation.ID
	}
	if env.Repository != nil && env.Repository.ID > 0 {
		d.RepositoryID = &env.Repository.ID
	}
	// An exact replay answers before anything else happens.
	if prior, err := deliveryByID(ctx, s.db, d.DeliveryID); err != nil || prior != nil {
		if err != nil {
			return DeliveryResult{}, err
		}
		return replayOf(*prior, d)
	}
	var res DeliveryResult
	var err error
	switch {
	case d.InstallationID == nil:
		res, err = s.settle(ctx, d, ResultIgnored, "no_installation", nil)
	case h.Event == "push":
		res, err = s.receivePush(ctx, d, body)
	case h.Event == "pull_request":
		res, err = s.receivePull(ctx, d, body)
	case d.Kind == KindLifecycle:
		res, err = s.receiveLifecycle(ctx, d)
	default:
		res, err = s.settle(ctx, d, ResultIgnored, "event_not_handled", nil)
	}
	return res, err
}

func printable(v string, max int) bool {
	if v == "" || len(v) > max {
		return false
	}
	for _, r := range v {
		if r < 0x21 || r > 0x7e {
			return false
		}
	}
	return true
}

func kindOf(event string) string {
	switch event {
	case "push", "pull_request":
		return KindSource
	case "installation", "installation_repositories":
		return KindLifecycle
	}
	return KindOther
}

// replayOf answers a delivery ID seen before: the same delivery gets the
// recorded result; anything else under that ID is a conflict.
func replayOf(prior, d Delivery) (DeliveryResult, error) {
	same := prior.Kind == d.Kind && prior.Event == d.Event && equalPtr(prior.Action, d.Action) &&
		equalPtr(prior.InstallationID, d.InstallationID) && equalPtr(prior.RepositoryID, d.RepositoryID) &&
		bytes.Equal(prior.PayloadSHA256, d.PayloadSHA256)
	if !same {
		return DeliveryResult{}, ErrDeliveryConflict
	}
	return DeliveryResult{Delivery: prior, Replayed: true}, nil
}

func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// settle records a delivery that changes nothing else. Losing the insert
// race means another request recorded the ID: its record is the answer.
func (s *Service) settle(ctx context.Context, d Delivery, result, outcome string, extra func(tx *sqlx.Tx) error) (DeliveryResult, error) {
	now := s.stamp()
	d.Result, d.Outcome, d.ReceivedAt, d.SettledAt = result, outcome, now, now
	var inserted bool
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var err error
		if inserted, err = insertDelivery(ctx, tx, d); err != nil || !inserted {
			return err
		}
		if extra != nil {
			return extra(tx)
		}
		return nil
	})
	if err != nil {
		return DeliveryResult{}, err
	}
	if !inserted {
		return s.reread(ctx, d)
	}
	return DeliveryResult{Delivery: d}, nil
}

func (s *Service) reread(ctx context.Context, d Delivery) (DeliveryResult, error) {
	prior, err := deliveryByID(ctx, s.db, d.DeliveryID)
	if err != nil {
		return DeliveryResult{}, err
	}
	if prior == nil {
		return DeliveryResult{}, fmt.Errorf("delivery %s vanished after a conflicting insert", d.DeliveryID)
	}
	return replayOf(*prior, d)
}

// boundRepository finds the organization owning a repository selected in
// a connected, bound installation; nil when there is none.
func boundRepository(ctx context.Context, q sqlx.QueryerContext, installationID, repositoryID int64) (*Repository, error) {
	var r Repository
	err := sqlx.GetContext(ctx, q, &r, `SELECT r.repository_id, r.installation_id, r.organization_id, r.owner, r.name,
			r.selected, r.updated_at
		FROM github_repositories r JOIN github_installations i ON i.installation_id = r.installation_id
		WHERE r.repository_id = $1 AND r.installation_id = $2 AND r.selected AND i.status = 'connected'
			AND i.organization_id = r.organization_id`, repositoryID, installationID)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading repository binding: %w", err)
	}
	return &r, nil
}

// candidate is one workspace a source delivery concerns.
type candidate struct {
	settings SourceSettings
	ing      Ingestion
}

// accept is the acceptance transaction of a source delivery: record it,
// create or reuse each workspace's ingestion, associate them, dispatch
// each new one exactly once, and write the audit evidence.
func (s *Service) accept(ctx context.Context, d Delivery, cands []candidate, outcomeIfNone string) (DeliveryResult, error) {
	now := s.stamp()
	d.ReceivedAt, d.SettledAt = now, now
	d.Result, d.Outcome = ResultAccepted, "ingested"
	if len(cands) == 0 {
		d.Result, d.Outcome = ResultIgnored, outcomeIfNone
	}
	var inserted bool
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		ids := pq.StringArray{}
		type created struct {
			id string
			c  candidate
		}
		var fresh []created
		for _, c := range cands {
			c.ing.ID, c.ing.CreatedAt = id.New("sin"), now
			ingID, isNew, err := createOrReuseIngestion(ctx, tx, c.ing)
			if err != nil {
				return err
			}
			ids = append(ids, ingID)
			if isNew {
				fresh = append(fresh, created{ingID, c})
			}
		}
		d.IngestionIDs = ids
		var err error
		if inserted, err = insertDelivery(ctx, tx, d); err != nil || !inserted {
			// Rolled back: the winner's record is the answer.
			if err == nil {
				err = errLostRace
			}
			return err
		}
		if err := associate(ctx, tx, d.DeliveryID, ids); err != nil {
			return err
		}
		for _, f := range fresh {
			if err := s.dispatchIngestion(ctx, tx, f.c.ing.OrganizationID, f.id, now); err != nil {
				return err
			}
			if _, err := audit.Append(ctx, tx, audit.Entry{OrganizationID: f.c.ing.OrganizationID,
				Action: "source_ingestion.accepted", Actor: audit.Actor{Type: audit.ActorSystem, ID: "github-app"},
				TargetType: "source_ingestion", TargetID: f.id, Evidence: map[string]any{
					"workspace_id": f.c.ing.WorkspaceID, "delivery_id": d.DeliveryID, "trigger": f.c.ing.Trigger,
					"commit_sha": f.c.ing.HeadSHA, "workflow_id": WorkflowIDOf(f.id),
				}}); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, errLostRace) {
		return s.reread(ctx, d)
	}
	if err != nil {
		return DeliveryResult{}, err
	}
	return DeliveryResult{Delivery: d}, nil
}

var errLostRace = errors.New("delivery recorded concurrently")

func (s *Service) receivePush(ctx context.Context, d Delivery, body []byte) (DeliveryResult, error) {
	var p pushPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return s.settle(ctx, d, ResultIgnored, "payload_unreadable", nil)
	}
	if tag, ok := strings.CutPrefix(p.Ref, "refs/tags/"); ok {
		return s.receiveTag(ctx, d, p, tag)
	}
	branch, ok := strings.CutPrefix(p.Ref, "refs/heads/")
	switch {
	case !ok:
		return s.settle(ctx, d, ResultIgnored, "not_a_branch", nil)
	case p.Deleted:
		return s.settle(ctx, d, ResultIgnored, "branch_deleted", nil)
	case !isSHA(p.After) || d.RepositoryID == nil:
		return s.settle(ctx, d, ResultIgnored, "payload_incomplete", nil)
	}
	repo, err := boundRepository(ctx, s.db, *d.InstallationID, *d.RepositoryID)
	if err != nil {
		return DeliveryResult{}, err
	}
	if repo == nil {
		return s.settle(ctx, d, ResultIgnored, "repository_not_bound", nil)
	}
	settings, err := trackingSettings(ctx, s.db, repo.OrganizationID, repo.RepositoryID)
	if err != nil {
		return DeliveryResult{}, err
	}
	// The commit lists are complete only when the branch existed, history
	// was not rewritten and the provider did not cap them.
	var paths []string
	complete := !p.Created && !p.Forced && len(p.Commits) > 0 && len(p.Commits) < pushMaxCommits &&
		strings.Trim(p.Before, "0") != ""
	for _, c := range p.Commits {
		paths = append(paths, c.Added...)
		paths = append(paths, c.Removed...)
		paths = append(paths, c.Modified...)
	}
	var cands []candidate
	tracked, filtered := 0, 0
	for _, st := range settings {
		if st.TrackedBranch != branch || st.InstallationID != repo.InstallationID {
			continue
		}
		tracked++
		if complete && !MatchAny(st.TriggerPaths, paths) {
			filtered++
			continue
		}
		ing := Ingestion{OrganizationID: st.OrganizationID, WorkspaceID: st.WorkspaceID,
			Identity: "push:" + p.Ref + ":" + p.After, SourceSettingsID: st.ID, Trigger: TriggerPush,
			InstallationID: repo.InstallationID, RepositoryID: repo.RepositoryID, RepositoryOwner: repo.Owner,
			RepositoryName: repo.Name, Ref: p.Ref, HeadSHA: p.After}
		if complete {
			ing.PushedPaths = pq.StringArray(boundPaths(paths))
		}
		cands = append(cands, candidate{settings: st, ing: ing})
	}
	none := "no_tracking_workspace"
	if tracked > 0 && filtered == tracked {
		none = "no_trigger_path_matched"
	}
	return s.accept(ctx, d, cands, none)
}

// boundPaths keeps at most 5,000 distinct paths of a push for the record.
func boundPaths(paths []string) []string {
	slices.Sort(paths)
	paths = slices.Compact(paths)
	if len(paths) > 5000 {
		paths = paths[:5000]
	}
	if paths == nil {
		paths = []string{}
	}
	return paths
}

func isSHA(v string) bool {
	if len(v) != 40 {
		return false
	}
	for _, r := range v {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return strings.Trim(v, "0") != ""
}

func (s *Service) receivePull(ctx context.Context, d Delivery, body []byte) (DeliveryResult, error) {
	var p pullPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return s.settle(ctx, d, ResultIgnored, "payload_unreadable", nil)
	}
	switch {
	case !slices.Contains(pullTriggers, p.Action):
		return s.settle(ctx, d, ResultIgnored, "action_not_planned", nil)
	case p.PullRequest.State != "open":
		return s.settle(ctx, d, ResultIgnored, "pull_request_not_open", nil)
	case !isSHA(p.PullRequest.Head.SHA) || p.Number <= 0 || d.RepositoryID == nil || p.PullRequest.Base.Repo == nil ||
		p.PullRequest.Base.Repo.ID != *d.RepositoryID:
		return s.settle(ctx, d, ResultIgnored, "payload_incomplete", nil)
	}
	repo, err := boundRepository(ctx, s.db, *d.InstallationID, *d.RepositoryID)
	if err != nil {
		return DeliveryResult{}, err
	}
	if repo == nil {
		return s.settle(ctx, d, ResultIgnored, "repository_not_bound", nil)
	}
	settings, err := trackingSettings(ctx, s.db, repo.OrganizationID, repo.RepositoryID)
	if err != nil {
		return DeliveryResult{}, err
	}
	fork := p.PullRequest.Head.Repo == nil || p.PullRequest.Head.Repo.ID != repo.RepositoryID
	base, head, number := p.PullRequest.Base.Ref, p.PullRequest.Head.Ref, p.Number
	// The head repository's name is shown to the person who decides on a
	// fork's pull request; a deleted fork has none.
	var headOwner, headName *string
	if hr := p.PullRequest.Head.Repo; hr != nil && printable(hr.Owner.Login, 100) && printable(hr.Name, 100) {
		headOwner, headName = &hr.Owner.Login, &hr.Name
	}
	var cands []candidate
	for _, st := range settings {
		if st.TrackedBranch != base || st.InstallationID != repo.InstallationID {
			continue
		}
		// Path filtering needs the changed-files list, which the
		// ingestion reads from the provider outside this transaction.
		cands = append(cands, candidate{settings: st, ing: Ingestion{OrganizationID: st.OrganizationID,
			WorkspaceID: st.WorkspaceID, Identity: fmt.Sprintf("pull_request:%d:%s", number, p.PullRequest.Head.SHA),
			SourceSettingsID: st.ID, Trigger: TriggerPullRequest, InstallationID: repo.InstallationID,
			RepositoryID: repo.RepositoryID, RepositoryOwner: repo.Owner, RepositoryName: repo.Name,
			Ref: fmt.Sprintf("refs/pull/%d/head", number), HeadSHA: p.PullRequest.Head.SHA, PullNumber: &number,
			BaseRef: &base, HeadRef: &head, Fork: fork, HeadRepositoryOwner: headOwner, HeadRepositoryName: headName}})
	}
	return s.accept(ctx, d, cands, "no_tracking_workspace")
}

// dispatchIngestion inserts an ingestion's job and arms its durable
// dispatch record (workflow source-ingestion-{id}), in the transaction that
// makes the ingestion pending.
func (s *Service) dispatchIngestion(ctx context.Context, tx *sqlx.Tx, organizationID, ingestionID string, now time.Time) error {
	if s.jobs == nil {
		return fmt.Errorf("no job inserter: %w", fault.ErrUnavailable)
	}
	if err := dispatch.Arm(ctx, tx, DispatchIngestion, organizationID, ingestionID, now); err != nil {
		return err
	}
	if _, err := s.jobs.InsertTx(ctx, tx.Tx, IngestArgs{IngestionID: ingestionID}, nil); err != nil {
		return fmt.Errorf("dispatching %s: %w", WorkflowIDOf(ingestionID), err)
	}
	return nil
}
