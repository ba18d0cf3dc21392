package site

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/cairnhq/cairn/bff/apiclient"
)

// sourceIngestion is a push or pull request of a workspace's repository on
// its way to a run, as the API reads it.
type sourceIngestion struct {
	ID                string     `json:"id"`
	WorkspaceID       string     `json:"workspace_id"`
	Trigger           string     `json:"trigger"`
	Status            string     `json:"status"`
	HeldReason        *string    `json:"held_reason"`
	FailureCode       *string    `json:"failure_code"`
	Repository        string     `json:"repository"`
	HeadSHA           string     `json:"head_sha"`
	PullRequestNumber *int       `json:"pull_request_number"`
	BaseRef           *string    `json:"base_ref"`
	HeadRef           *string    `json:"head_ref"`
	Fork              bool       `json:"fork"`
	HeadRepository    *string    `json:"head_repository"`
	HeldAt            *time.Time `json:"held_at"`
	PlanApprovedBy    *string    `json:"plan_approved_by"`
	PlanApprovedAt    *time.Time `json:"plan_approved_at"`
	RunID             *string    `json:"run_id"`
	CreatedAt         time.Time  `json:"created_at"`
}

// heldReasons say in a person's words why a pull request waits.
var heldReasons = map[string]string{
	"fork_pull_request": "Pull requests from forks are not planned automatically: nobody trusted has looked at their configuration, " +
		"and planning runs it.",
	"fork_runs_throttled": "This workspace plans pull requests from forks automatically, but the repository reached its hourly " +
		"limit of such plans.",
}

// HeldReasonText is why the pull request was held, or "" when it was not.
func (i sourceIngestion) HeldReasonText() string {
	if i.HeldReason == nil {
		return ""
	}
	return heldReasons[*i.HeldReason]
}

// Held reports whether the pull request waits for a person.
func (i sourceIngestion) Held() bool { return i.Status == "held" }

// pullRequestPage is a held (or once held) pull request of a workspace:
// what it would plan, and the Plan this commit action.
type pullRequestPage struct {
	*workspaceShell
	Ingestion sourceIngestion
	// Approver is who planned it, by name where the dashboard can tell.
	Approver string
	// CanPlan is run:create: a person with it may plan the exact commit.
	CanPlan bool
}

// pullRequestPath is the dashboard page of a workspace's pull request.
func pullRequestPath(workspaceID, ingestionID string) string {
	return "/workspaces/" + url.PathEscape(workspaceID) + "/pull-requests/" + url.PathEscape(ingestionID)
}

// pullRequestNotices are what the plan action redirects back with.
var pullRequestNotices = map[string]string{
	"planned": "Planned: Cairn fetches exactly this commit and plans it as an untrusted run (no credentials, sensitive " +
		"variables or state access). Its run is linked here once it exists.",
}

// loadPullRequest reads the ingestion the path names; one of another
// workspace is not found, like a missing one: a page admitted for one
// workspace never shows or acts on another's.
func (s *Site) loadPullRequest(ctx context.Context, r *http.Request, token string, sh *workspaceShell) (any, error) {
	page := pullRequestPage{workspaceShell: sh, CanPlan: sh.Caller.Can("run:create")}
	if sh.Notice == "" && sh.Error == "" {
		sh.Notice = pullRequestNotices[r.URL.Query().Get("done")]
	}
	if err := s.api.Call(ctx, token, http.MethodGet, "/v1/source-ingestions/"+url.PathEscape(r.PathValue("ingestionId")), nil,
		&page.Ingestion); err != nil {
		return nil, err
	}
	if page.Ingestion.WorkspaceID != sh.Workspace.ID {
		return nil, &apiclient.Error{Status: http.StatusNotFound, Code: "NOT_FOUND"}
	}
	if by := page.Ingestion.PlanApprovedBy; by != nil {
		page.Approver = s.actorNames(ctx, token).of("user", *by)
	}
	return page, nil
}

// planPullRequest is Plan this commit: it plans the held pull request for
// exactly the head commit the page showed (the form carries it), so a head
// that moved meanwhile is the API's 409, never a plan of another commit.
func (s *Site) planPullRequest(w http.ResponseWriter, r *http.Request, token string) {
	ctx := r.Context()
	var current sourceIngestion
	ingestion := url.PathEscape(r.PathValue("ingestionId"))
	err := s.api.Call(ctx, token, http.MethodGet, "/v1/source-ingestions/"+ingestion, nil, &current)
	if err == nil && current.WorkspaceID != r.PathValue("id") {
		err = &apiclient.Error{Status: http.StatusNotFound, Code: "NOT_FOUND"}
	}
	if err == nil {
		err = s.api.Mutate(ctx, token, http.MethodPost, "/v1/source-ingestions/"+ingestion+"/actions/plan", newKey(),
			map[string]string{"commit_sha": r.PostFormValue("commit_sha")}, nil)
	}
	if err != nil {
		s.refused(w, r, token, "pull-request", s.loadPullRequest, err)
		return
	}
	http.Redirect(w, r, pullRequestPath(r.PathValue("id"), r.PathValue("ingestionId"))+"?done=planned", http.StatusSeeOther)
}

// heldPullRequests is the overview's list of pull requests waiting for a
// person; Unavailable says the list could not be read.
type heldPullRequests struct {
	Items       []sourceIngestion
	More        bool
	Unavailable bool
}

// loadHeldPullRequests reads the first page of a workspace's held pull
// requests. A failure shows as unavailable in its own section, never as
// an empty list, and does not take the rest of the overview down.
func (s *Site) loadHeldPullRequests(ctx context.Context, token, workspaceID string) heldPullRequests {
	list, err := apiclient.List[sourceIngestion](ctx, s.api, token, "/v1/workspaces/"+url.PathEscape(workspaceID)+
		"/held-source-ingestions?limit=10")
	if err != nil {
		return heldPullRequests{Unavailable: true}
	}
	return heldPullRequests{Items: list.Data, More: list.NextCursor != ""}
}
