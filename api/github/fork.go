package github

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/checkrun"
	"github.com/cairnhq/cairn/api/dispatch"
	"github.com/cairnhq/cairn/api/platform/cursor"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
)

// hold holds a pending ingestion for a person, in a transaction of its own.
func (s *Service) hold(ctx context.Context, ingestionID, reason string) error {
	return db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		ing, err := ingestionByID(ctx, tx, ingestionID, true)
		if err != nil || ing.Status != IngestionPending {
			return err
		}
		return s.holdInTx(ctx, tx, ing, reason)
	})
}

// holdInTx holds a locked pending ingestion: it waits, with its reason,
// for a person to plan its exact head commit. Its dispatch is complete
// (nothing is owed until then), and its neutral check says so on the
// commit, linking to the page where a person can plan it.
func (s *Service) holdInTx(ctx context.Context, tx *sqlx.Tx, ing Ingestion, reason string) error {
	now := s.stamp()
	ing.Status, ing.HeldReason, ing.HeldAt = IngestionHeld, &reason, &now
	if err := saveIngestion(ctx, tx, ing); err != nil {
		return err
	}
	if err := dispatch.Complete(ctx, tx, ing.WorkflowID(), now); err != nil {
		return err
	}
	if _, err := audit.Append(ctx, tx, audit.Entry{OrganizationID: ing.OrganizationID, Action: "source_ingestion.held",
		Actor: audit.Actor{Type: audit.ActorSystem, ID: "github-app"}, TargetType: "source_ingestion", TargetID: ing.ID,
		Evidence: forkEvidence(ing, map[string]any{"reason": reason})}); err != nil {
		return err
	}
	if s.opts.Checks == nil {
		return nil
	}
	title, summary := s.heldCheckText(ing, reason)
	return s.opts.Checks.TrackHeld(ctx, tx, checkrun.Held{IngestionID: ing.ID, OrganizationID: ing.OrganizationID,
		WorkspaceID: ing.WorkspaceID, Title: title, Summary: summary, HeldAt: now},
		checkrun.Target{InstallationID: ing.InstallationID, RepositoryID: ing.RepositoryID,
			RepositoryOwner: ing.RepositoryOwner, RepositoryName: ing.RepositoryName, HeadSHA: ing.HeadSHA})
}

// heldCheckText is what a held ingestion's check says: why it was not
// planned and that a person can plan this exact commit. Reason codes and
// identifiers only, nothing the pull request's author wrote.
func (s *Service) heldCheckText(ing Ingestion, reason string) (title, summary string) {
	plan := fmt.Sprintf("A person with `run:create` on the workspace can plan this exact commit (`%s`) in Cairn.", ing.HeadSHA)
	switch reason {
	case HeldForkRunsThrottled:
		return "Not planned: fork pull request limit reached",
			fmt.Sprintf("This repository reached its limit of %d automatically planned pull requests from forks in an hour. %s\n\nReason: `%s`.",
				s.opts.ForkRunsPerHour, plan, reason)
	default:
		return "Not planned: pull request from a fork",
			fmt.Sprintf("Pull requests from forks are not planned automatically: their configuration has not been looked at by anyone trusted. %s\n\nReason: `%s`.",
				plan, reason)
	}
}

// forkEvidence is an ingestion's audit evidence about its pull request and
// fork, with extra keys added.
func forkEvidence(ing Ingestion, extra map[string]any) map[string]any {
	ev := map[string]any{"workspace_id": ing.WorkspaceID, "commit_sha": ing.HeadSHA,
		"repository": ing.RepositoryOwner + "/" + ing.RepositoryName}
	if ing.PullNumber != nil {
		ev["pull_request_number"] = *ing.PullNumber
	}
	if ing.HeadRepositoryOwner != nil && ing.HeadRepositoryName != nil {
		ev["fork_owner"], ev["fork_name"] = *ing.HeadRepositoryOwner, *ing.HeadRepositoryName
	}
	for k, v := range extra {
		ev[k] = v
	}
	return ev
}

// forkRunsOver reports whether a fork-triggered run of the ingestion would
// pass its repository's throttle (ForkRunsPerHour in the last
// ForkRunWindow). Read in the run's transaction after lockForkRuns, it is
// the decision; read elsewhere, only a hint.
func (s *Service) forkRunsOver(ctx context.Context, q sqlx.QueryerContext, ing Ingestion) (bool, error) {
	if !ing.Fork || ing.PlanApprovedBy != nil {
		return false, nil
	}
	recent, err := recentForkRuns(ctx, q, ing.RepositoryID, s.stamp().Add(-ForkRunWindow))
	if err != nil {
		return false, err
	}
	return ing.throttled(recent, s.opts.ForkRunsPerHour), nil
}

// PlanHeld is "Plan this commit": a person with run:create on the
// workspace plans a held pull request from a fork for exactly the head
// commit they saw (commitSHA must be the ingestion's, else
// ErrCommitMismatch). In the caller's transaction it records who approved
// and when, moves the ingestion back to pending, dispatches its job and
// appends the audit event. An agent or a token is refused: the decision to
// run code nobody trusted has looked at is a person's own. The run it
// becomes is never throttled and pins who approved it.
func (s *Service) PlanHeld(ctx context.Context, tx *sqlx.Tx, p access.Principal, ingestionID, commitSHA string) (Ingestion, error) {
	if p.Kind != access.KindUser {
		return Ingestion{}, fmt.Errorf("%w: only a person plans a held pull request", fault.ErrForbidden)
	}
	if err := p.RequireHuman(); err != nil {
		return Ingestion{}, err
	}
	ing, err := workspaceIngestion(ctx, tx, p.OrganizationID, ingestionID, true)
	if err != nil {
		return Ingestion{}, err
	}
	if _, err := s.workspaces.WorkspaceForWrite(ctx, tx, p, ing.WorkspaceID, access.PermRunCreate); err != nil {
		return Ingestion{}, err
	}
	if !ing.Plannable() {
		return Ingestion{}, ErrNotHeld
	}
	if commitSHA != ing.HeadSHA {
		return Ingestion{}, ErrCommitMismatch
	}
	now := s.stamp()
	approver := p.ID
	ing.Status, ing.PlanApprovedBy, ing.PlanApprovedAt = IngestionPending, &approver, &now
	if err := saveIngestion(ctx, tx, ing); err != nil {
		return Ingestion{}, err
	}
	if err := s.dispatchIngestion(ctx, tx, ing.OrganizationID, ing.ID, now); err != nil {
		return Ingestion{}, err
	}
	return ing, audit.Record(ctx, tx, p, "source_ingestion.plan_approved", "source_ingestion", ing.ID,
		forkEvidence(ing, map[string]any{"held_reason": *ing.HeldReason}))
}

// SourceIngestion reads one ingestion of a workspace the caller can see;
// another organization's, or one outside the caller's boundaries, is not
// found.
func (s *Service) SourceIngestion(ctx context.Context, p access.Principal, ingestionID string) (Ingestion, error) {
	ing, err := workspaceIngestion(ctx, s.db, p.OrganizationID, ingestionID, false)
	if err != nil {
		return Ingestion{}, err
	}
	if _, err := s.workspaces.GetWorkspace(ctx, p, ing.WorkspaceID); err != nil {
		return Ingestion{}, err
	}
	return ing, nil
}

// HeldIngestions lists a page of a workspace's held ingestions, most
// recently held first.
func (s *Service) HeldIngestions(ctx context.Context, p access.Principal, workspaceID string, page cursor.Page) ([]Ingestion, error) {
	w, err := s.workspaces.GetWorkspace(ctx, p, workspaceID)
	if err != nil {
		return nil, err
	}
	return heldIngestions(ctx, s.db, w.OrganizationID, w.ID, page)
}

// Reconcile runs one dispatch reconciler tick over source ingestions
// alone, on the service's clock (the worker's tick covers every kind).
func (s *Service) Reconcile(ctx context.Context) (dispatch.Report, error) {
	return dispatch.Reconcile(ctx, s.db, s.stamp(), map[string]dispatch.Handler{DispatchIngestion: s.Redeliver})
}

// Redeliver is the reconciler's handler of an ingestion's dispatch: an
// ingestion no longer pending (ready, skipped, failed, held) is settled;
// a live job (queued, scheduled, retrying or running) only waits; a job
// that was lost or exhausted its attempts (a push accepted during a
// code-host outage) is delivered again.
func (s *Service) Redeliver(ctx context.Context, tx *sqlx.Tx, d dispatch.Record) (dispatch.Outcome, error) {
	ing, err := ingestionByID(ctx, tx, d.SubjectID, false)
	if err != nil {
		return 0, err
	}
	if ing.Status != IngestionPending {
		return dispatch.Settled, nil
	}
	if s.jobs == nil {
		return 0, fmt.Errorf("no job inserter: %w", fault.ErrUnavailable)
	}
	res, err := s.jobs.InsertTx(ctx, tx.Tx, IngestArgs{IngestionID: ing.ID}, nil)
	if err != nil {
		return 0, fmt.Errorf("redelivering %s: %w", d.ID, err)
	}
	if res.UniqueSkippedAsDuplicate {
		return dispatch.Waiting, nil
	}
	return dispatch.Redelivered, nil
}
