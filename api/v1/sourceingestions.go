package v1

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/github"
	"github.com/cairnhq/cairn/api/platform/cursor"
)

// SourceIngestionView is a source ingestion: one push or pull request of a
// workspace's repository on its way to a run.
type SourceIngestionView struct {
	ID                string     `json:"id" doc:"Source ingestion ID (sin_…)."`
	Object            string     `json:"object" enum:"source_ingestion"`
	WorkspaceID       string     `json:"workspace_id"`
	WorkflowID        string     `json:"workflow_id" doc:"The deterministic dispatch identity source-ingestion-{id}."`
	Trigger           string     `json:"trigger" enum:"push,pull_request"`
	Status            string     `json:"status" enum:"pending,held,ready,skipped,failed"`
	HeldReason        *string    `json:"held_reason" enum:"fork_pull_request,fork_runs_throttled" doc:"Why it was held (kept after a person planned it)."`
	FailureCode       *string    `json:"failure_code"`
	Repository        string     `json:"repository" doc:"owner/name of the base repository."`
	RepositoryID      int64      `json:"repository_id"`
	Ref               string     `json:"ref"`
	HeadSHA           string     `json:"head_sha" doc:"The full commit SHA the delivery named: the only commit a person can plan."`
	PullRequestNumber *int       `json:"pull_request_number"`
	BaseRef           *string    `json:"base_ref"`
	HeadRef           *string    `json:"head_ref"`
	Fork              bool       `json:"fork" doc:"The pull request's head repository is not the base repository."`
	HeadRepository    *string    `json:"head_repository" doc:"owner/name of the pull request's head repository (the fork), when the delivery named one."`
	HeldAt            *time.Time `json:"held_at"`
	PlanApprovedBy    *string    `json:"plan_approved_by" doc:"The user who planned this held pull request's head commit."`
	PlanApprovedAt    *time.Time `json:"plan_approved_at"`
	RunID             *string    `json:"run_id"`
	CreatedAt         time.Time  `json:"created_at"`
	SettledAt         *time.Time `json:"settled_at"`
}

func sourceIngestionView(i github.Ingestion) SourceIngestionView {
	v := SourceIngestionView{ID: i.ID, Object: "source_ingestion", WorkspaceID: i.WorkspaceID, WorkflowID: i.WorkflowID(),
		Trigger: i.Trigger, Status: i.Status, HeldReason: i.HeldReason, FailureCode: i.FailureCode,
		Repository: i.RepositoryOwner + "/" + i.RepositoryName, RepositoryID: i.RepositoryID, Ref: i.Ref, HeadSHA: i.HeadSHA,
		PullRequestNumber: i.PullNumber, BaseRef: i.BaseRef, HeadRef: i.HeadRef, Fork: i.Fork, HeldAt: i.HeldAt,
		PlanApprovedBy: i.PlanApprovedBy, PlanApprovedAt: i.PlanApprovedAt, RunID: i.RunID, CreatedAt: i.CreatedAt,
		SettledAt: i.SettledAt}
	if i.HeadRepositoryOwner != nil && i.HeadRepositoryName != nil {
		head := *i.HeadRepositoryOwner + "/" + *i.HeadRepositoryName
		v.HeadRepository = &head
	}
	return v
}

// PlanHeldRequest is the body of POST /v1/source-ingestions/{id}/actions/plan.
type PlanHeldRequest struct {
	CommitSHA string `json:"commit_sha" pattern:"^[0-9a-f]{40}$" doc:"The full head commit SHA the person saw; it must be the held ingestion's."`
}

type planHeldInput struct {
	IdempotencyHeader
	IDPath
	Body PlanHeldRequest
}

type heldListInput struct {
	IDPath
	ListParams
}

var heldList = listSpec{endpoint: "held-source-ingestions", invalidCode: "SOURCE_INGESTION_LIST_CURSOR_INVALID"}

func (a *API) registerSourceIngestions() {
	tags := []string{"Code host"}

	register(a, huma.Operation{
		OperationID: "list-held-source-ingestions", Method: http.MethodGet, Path: "/v1/workspaces/{id}/held-source-ingestions",
		Summary: "List a workspace's held pull requests, most recently held first", Tags: tags,
		Description: "Pull requests from forks that wait for a person (held_reason fork_pull_request, or " +
			"fork_runs_throttled when the repository met its hourly limit of automatic fork plans).",
	}, operationOptions{}, func(ctx context.Context, in *heldListInput) (*Listed[SourceIngestionView], error) {
		return listOf(ctx, a, heldList, in.ID, in.ListParams, func(p access.Principal, page cursor.Page) ([]SourceIngestionView, error) {
			svc, err := a.github()
			if err != nil {
				return nil, err
			}
			rows, err := svc.HeldIngestions(ctx, p, in.ID, page)
			return mapSlice(rows, sourceIngestionView), err
		}, func(v SourceIngestionView) cursor.Position {
			return cursor.Position{CreatedAt: *v.HeldAt, ID: v.ID}
		})
	})

	register(a, huma.Operation{
		OperationID: "get-source-ingestion", Method: http.MethodGet, Path: "/v1/source-ingestions/{id}",
		Summary: "Read a source ingestion", Tags: tags,
		Description: "Another organization's ingestion, or one of a workspace outside the caller's reach, is 404.",
	}, operationOptions{}, func(ctx context.Context, in *IDPath) (*Single[SourceIngestionView], error) {
		return single(ctx, a, func(p access.Principal) (SourceIngestionView, error) {
			svc, err := a.github()
			if err != nil {
				return SourceIngestionView{}, err
			}
			i, err := svc.SourceIngestion(ctx, p, in.ID)
			return sourceIngestionView(i), err
		})
	})

	register(a, huma.Operation{
		OperationID: "plan-held-source-ingestion", Method: http.MethodPost, Path: "/v1/source-ingestions/{id}/actions/plan",
		Summary: "Plan a held pull request's exact head commit", Tags: tags,
		Description: "Plan this commit: a person (a session, never an agent or a token) with run:create on the workspace " +
			"plans a held pull request from a fork for the head commit they saw. commit_sha must be the ingestion's head " +
			"SHA (409 SOURCE_INGESTION_COMMIT_MISMATCH); an ingestion that is not held is 409 SOURCE_INGESTION_NOT_HELD. " +
			"The ingestion goes back to pending with who approved it and when, its job is dispatched and the audit " +
			"event source_ingestion.plan_approved is written, all in one transaction. The run it becomes is a " +
			"speculative run of an untrusted fork, never throttled, and records who approved it.",
	}, operationOptions{mutation: true, admit: admitSourceIngestion}, func(ctx context.Context, in *planHeldInput) (*Mutated[SourceIngestionView], error) {
		svc, err := a.github()
		if err != nil {
			return nil, a.fail(ctx, err)
		}
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (SourceIngestionView, error) {
				i, err := svc.PlanHeld(ctx, tx, p, in.ID, in.Body.CommitSHA)
				return sourceIngestionView(i), err
			})
	})
}
