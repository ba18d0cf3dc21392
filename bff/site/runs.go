package site

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairnhq/cairn/bff/apiclient"
)

// runSummary is a run in the API's list.
type runSummary struct {
	ID               string               `json:"id"`
	WorkspaceID      string               `json:"workspace_id"`
	Kind             string               `json:"kind"`
	Status           string               `json:"status"`
	Message          string               `json:"message"`
	PlanStatus       string               `json:"plan_status"`
	ApplyStatus      string               `json:"apply_status"`
	AvailableActions []string             `json:"available_actions"`
	CreatedAt        time.Time            `json:"created_at"`
	UpdatedAt        time.Time            `json:"updated_at"`
	StatusTimestamps map[string]time.Time `json:"status_timestamps"`
	WorkspaceName    string               `json:"workspace_name"`
}

// terminalStatuses never change again; a page showing only these stops
// re-reading.
var terminalStatuses = []string{"applied", "planned_and_finished", "errored", "rejected", "canceled", "expired",
	"recovered", "plan_credentials_required", "policy_soft_failed"}

func terminal(status string) bool { return slices.Contains(terminalStatuses, status) }

// Terminal reports whether the run will never change again.
func (r runSummary) Terminal() bool { return terminal(r.Status) }

// Duration is how long the run has taken (so far).
func (r runSummary) Duration() time.Duration {
	end := time.Now()
	if r.Terminal() {
		end = r.UpdatedAt
	}
	return end.Sub(r.CreatedAt)
}

type workspaceRef struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	ProjectID string `json:"project_id"`
}

// reachableWorkspaces is the first hundred workspaces the caller reaches,
// oldest first; none when its teams grant nothing yet.
func (s *Site) reachableWorkspaces(ctx context.Context, token string) ([]workspaceRef, error) {
	page, err := reachable(apiclient.List[workspaceRef](ctx, s.api, token, "/v1/workspaces?limit=100"))
	return page.Data, err
}

// reachable is a list read in which a refusal for want of the permission
// in any workspace is the answer "none": the caller (a member whose teams
// grant nothing yet) reaches no workspace, which is an empty list, not a
// failure.
func reachable[T any](page apiclient.Page[T], err error) (apiclient.Page[T], error) {
	if err != nil && apiclient.StatusOf(err) == http.StatusForbidden {
		return apiclient.Page[T]{}, nil
	}
	return page, err
}

// runsPage is the runs list.
type runsPage struct {
	Runs []runSummary
	// Reaches says the caller reaches at least one workspace.
	Reaches bool
	Query   string
	Status  string
	// Workspace is the ID the list is filtered by, WorkspaceName its
	// name as the listed runs give it. The filter's other choices are
	// loaded after the page (workspaceOptions): a page of runs does not
	// read the organization's workspaces.
	Workspace     string
	WorkspaceName string
	Statuses      []string
	// Live is set while a listed run is not terminal: the page re-reads
	// its first page on a short interval.
	Live bool
	// MoreURL loads the next page's rows; RefreshURL re-reads the first.
	MoreURL    string
	RefreshURL string
}

var filterStatuses = []string{"pending", "plan_queued", "planning", "policy_override", "awaiting_approval", "apply_queued",
	"applying", "recovery_required", "applied", "planned_and_finished", "policy_soft_failed", "errored", "rejected",
	"canceled", "expired"}

func (s *Site) runs(w http.ResponseWriter, r *http.Request, token string) {
	f := s.frame(r, "Runs")
	if err := s.probe(r.Context(), token, ""); err != nil {
		if s.withoutOrganization(r, token, err) {
			http.Redirect(w, r, "/organizations", http.StatusSeeOther)
			return
		}
		s.unavailable(w, r, f, err)
		return
	}
	q := r.URL.Query()
	page := runsPage{Query: strings.TrimSpace(q.Get("q")), Status: q.Get("status"), Workspace: q.Get("workspace"), Statuses: filterStatuses}
	perPage := 25
	if n, err := strconv.Atoi(q.Get("per_page")); err == nil && n >= 1 && n <= 100 {
		perPage = n
	}
	path := "/v1/runs?limit=" + strconv.Itoa(perPage)
	if page.Workspace != "" {
		path += "&workspace_id=" + url.QueryEscape(page.Workspace)
	}
	if c := q.Get("cursor"); c != "" {
		path += "&cursor=" + url.QueryEscape(c)
	}
	list, err := reachable(apiclient.List[runSummary](r.Context(), s.api, token, path))
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page.Reaches = len(list.Data) > 0
	if !page.Reaches && page.Query == "" && page.Status == "" && page.Workspace == "" {
		// Only an empty, unfiltered list says why it is empty.
		reach, err := reachable(apiclient.List[workspaceRef](r.Context(), s.api, token, "/v1/workspaces?limit=1"))
		if err != nil {
			s.unavailable(w, r, f, err)
			return
		}
		page.Reaches = len(reach.Data) > 0
	}
	page.WorkspaceName = page.Workspace
	for _, run := range list.Data {
		if run.WorkspaceID == page.Workspace {
			page.WorkspaceName = run.WorkspaceName
		}
		if page.Status != "" && run.Status != page.Status {
			continue
		}
		if page.Query != "" && !matches(page.Query, run.ID, run.Message, run.WorkspaceName) {
			continue
		}
		page.Runs = append(page.Runs, run)
		page.Live = page.Live || !run.Terminal()
	}
	filters := url.Values{}
	for k, v := range map[string]string{"q": page.Query, "status": page.Status, "workspace": page.Workspace, "per_page": q.Get("per_page")} {
		if v != "" {
			filters.Set(k, v)
		}
	}
	page.RefreshURL = "/runs?" + filters.Encode()
	if list.NextCursor != "" {
		filters.Set("cursor", list.NextCursor)
		page.MoreURL = "/runs?" + filters.Encode()
	}
	f.Page = page
	s.render(w, r, http.StatusOK, "runs.html", f)
}

// workspaceOptionsPage is the runs filter's workspace choices.
type workspaceOptionsPage struct {
	Workspaces []workspaceRef
	Selected   string
}

// workspaceOptions renders the choices of the runs page's workspace
// filter, which the page loads once it is shown: the first hundred
// workspaces the caller reaches, and the one selected if it is not among
// them.
func (s *Site) workspaceOptions(w http.ResponseWriter, r *http.Request, token string) {
	f := s.frame(r, "Runs")
	workspaces, err := s.reachableWorkspaces(r.Context(), token)
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page := workspaceOptionsPage{Workspaces: workspaces, Selected: r.URL.Query().Get("selected")}
	if page.Selected != "" && !slices.ContainsFunc(workspaces, func(w workspaceRef) bool { return w.ID == page.Selected }) {
		var selected workspaceRef
		if err := s.api.Call(r.Context(), token, http.MethodGet, "/v1/workspaces/"+url.PathEscape(page.Selected), nil, &selected); err == nil {
			page.Workspaces = append([]workspaceRef{selected}, page.Workspaces...)
		}
	}
	f.Page = page
	s.render(w, r, http.StatusOK, "runs-workspace-options.html", f)
}

func matches(query string, fields ...string) bool {
	query = strings.ToLower(query)
	for _, f := range fields {
		if strings.Contains(strings.ToLower(f), query) {
			return true
		}
	}
	return false
}

// runReview is the API's run review, as much as the page shows.
type runReview struct {
	runSummary
	ProjectID string `json:"project_id"`
	CreatedBy struct {
		Kind string `json:"kind"`
		ID   string `json:"id"`
	} `json:"created_by"`
	Pinned struct {
		ConfigurationVersionID string `json:"configuration_version_id"`
		ToolVersion            string `json:"tool_version"`
		Region                 string `json:"region"`
		DependencyLockDigest   string `json:"dependency_lock_digest"`
	} `json:"pinned"`
	// The run's own options, shown in the header when it has any.
	TargetAddrs  []string `json:"target_addrs"`
	ReplaceAddrs []string `json:"replace_addrs"`
	Refresh      bool     `json:"refresh"`
	RefreshOnly  bool     `json:"refresh_only"`
	SavePlan     bool     `json:"save_plan"`
	EmptyApply   bool     `json:"allow_empty_apply"`
	Variables    []struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	} `json:"variables"`
	Plan struct {
		Status                    string  `json:"status"`
		HasChanges                *bool   `json:"has_changes"`
		ResourceAdditions         *int    `json:"resource_additions"`
		ResourceChanges           *int    `json:"resource_changes"`
		ResourceDestructions      *int    `json:"resource_destructions"`
		PlanDigest                *string `json:"plan_digest"`
		PredecessorStateVersionID *string `json:"predecessor_state_version_id"`
	} `json:"plan"`
	Policy struct {
		Outcome      *string `json:"outcome"`
		Status       string  `json:"status"`
		ResultDigest *string `json:"result_digest"`
		Gate         struct {
			Open  bool       `json:"open"`
			Until *time.Time `json:"until"`
		} `json:"gate"`
		Attachments []policyResult `json:"attachments"`
	} `json:"policy"`
	Apply struct {
		Status               string  `json:"status"`
		StateVersionID       *string `json:"state_version_id"`
		EmergencyStateDigest *string `json:"emergency_state_digest"`
	} `json:"apply"`
	Decision *struct {
		Action    string    `json:"action"`
		ActorID   string    `json:"actor_id"`
		ActorName *string   `json:"actor_name"`
		DecidedAt time.Time `json:"decided_at"`
		// Reason is the discard reason, when one was given.
		Reason *string `json:"reason"`
	} `json:"decision"`
	TerminalReason        *string    `json:"terminal_reason"`
	LeaseExpiresAt        *time.Time `json:"lease_expires_at"`
	LeaseRemainingSeconds *int       `json:"lease_remaining_seconds"`
	Recovery              *struct {
		CurrentStateVersionID *string `json:"current_state_version_id"`
		CurrentStateDigest    string  `json:"current_state_digest"`
		EmergencyStateDigest  *string `json:"emergency_state_digest"`
	} `json:"recovery"`
	// ForceExecuteDiscards are the runs "Run this plan now" discards.
	ForceExecuteDiscards []string `json:"force_execute_discards"`
	// Untrusted says why nothing secret reached the run's plan, and
	// whether a person released it.
	Untrusted *untrustedReview `json:"untrusted"`
	// ReleasedFromRunID is the agent's run a person released as this one.
	ReleasedFromRunID *string `json:"released_from_run_id"`
	// TriggeredByRunID is the applied run of another workspace whose run
	// trigger created this run.
	TriggeredByRunID *string `json:"triggered_by_run_id"`
	// Source is the code-host provenance; nil for uploaded runs.
	Source   *runSource `json:"source_provenance"`
	Evidence struct {
		Attempts []attempt `json:"attempts"`
	} `json:"evidence"`

	// The approval stage's console derives from these (ApprovalEvents).
	ApprovalDeadline *time.Time `json:"approval_deadline"`
	Overrides        struct {
		Records   []overrideRecord `json:"records"`
		Truncated bool             `json:"truncated"`
	} `json:"overrides"`
}

// untrustedReview is why nothing secret reached an untrusted run's plan.
type untrustedReview struct {
	Reason   string         `json:"reason"`
	Withheld []string       `json:"withheld"`
	Release  *releaseReview `json:"release"`
}

// releaseReview is who released an agent's run as which run.
type releaseReview struct {
	RunID     string  `json:"run_id"`
	ActorID   string  `json:"actor_id"`
	ActorName *string `json:"actor_name"`
}

// attempt is one phase attempt's timing, as the review records it.
type attempt struct {
	Phase      string     `json:"phase"`
	Status     string     `json:"status"`
	QueuedAt   time.Time  `json:"queued_at"`
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
}

type policyResult struct {
	ID              string  `json:"id"`
	PolicySetName   string  `json:"policy_set_name"`
	VersionNumber   int     `json:"version_number"`
	Scope           string  `json:"scope"`
	EnforcementMode string  `json:"enforcement_mode"`
	Status          string  `json:"status"`
	ErrorCode       *string `json:"error_code"`
	ResultDigest    string  `json:"result_digest"`
	Overridable     bool    `json:"overridable"`
	Findings        []struct {
		Title           string `json:"title"`
		Message         string `json:"message"`
		ResourceAddress string `json:"resource_address"`
	} `json:"findings"`
}

// stage is one step of the run's timeline.
type stage struct {
	Name     string
	Phase    string // log phase, "" when the stage has no console
	State    string // pending, running, succeeded, failed, skipped, waiting
	Duration time.Duration
	Open     bool
}

type runPage struct {
	Run       runReview
	Workspace string
	Stages    []stage
	Can       map[string]bool
	// Destroys is set when the plan destroys something: approval then asks
	// for an inline confirmation restating the counts.
	Destroys bool
	Reason   string
	// FinalLog is at most the last eight lines of the failed phase's log,
	// FailedPhase that phase.
	FinalLog    []string
	FailedPhase string
	Notice      string
	// State is the state version the apply published, when recorded;
	// StateUnavailable says it could not be read.
	State            *stateVersion
	StateUnavailable bool
	Outputs          []stateOutput
	// OutputsUnavailable says the published state's outputs could not be
	// read: the page says so rather than showing none.
	OutputsUnavailable bool
	// FinalLogUnavailable says the failed phase's log could not be read.
	FinalLogUnavailable bool
	// Author is who started the run, by the name people gave it where
	// the dashboard can tell.
	Author string
	// Downloads is the downloads section; nil renders none.
	Downloads *downloads
	// TakeoverHint is set after a refusal because another principal holds
	// the recovery lease.
	TakeoverHint bool
}

func (s *Site) run(w http.ResponseWriter, r *http.Request, token string) {
	s.renderRun(w, r, token, r.URL.Query().Get("notice"))
}

func (s *Site) renderRun(w http.ResponseWriter, r *http.Request, token, notice string) {
	s.renderRunPage(w, r, token, runPage{Notice: notice})
}

// renderRunPage renders the run page around what the caller already
// decided to say.
func (s *Site) renderRunPage(w http.ResponseWriter, r *http.Request, token string, page runPage) {
	id := r.PathValue("id")
	f := s.frame(r, "Run "+id)
	var review runReview
	if err := s.api.Call(r.Context(), token, http.MethodGet, "/v1/runs/"+url.PathEscape(id), nil, &review); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	if review.Source != nil {
		review.Source.web = s.opts.CodeHostWebURL
	}
	page.Run, page.Can = review, map[string]bool{}
	for _, a := range review.AvailableActions {
		page.Can[a] = true
	}
	page.Destroys = review.Plan.ResourceDestructions != nil && *review.Plan.ResourceDestructions > 0
	page.Stages = stagesOf(review)
	var ws workspaceRef
	if err := s.api.Call(r.Context(), token, http.MethodGet, "/v1/workspaces/"+url.PathEscape(review.WorkspaceID), nil, &ws); err == nil {
		page.Workspace = ws.Name
	}
	if review.Apply.StateVersionID != nil {
		var sv stateVersion
		esc := url.PathEscape(*review.Apply.StateVersionID)
		if err := s.api.Call(r.Context(), token, http.MethodGet, "/v1/state-versions/"+esc, nil, &sv); err == nil {
			page.State = &sv
			// Outputs that fail to load say so; the state itself shows.
			outputs, err := s.outputs(r.Context(), token, *review.Apply.StateVersionID)
			page.Outputs, page.OutputsUnavailable = outputs, err != nil
		} else {
			page.StateUnavailable = true
		}
	}
	if endedFor(review) {
		page.Reason = reasonSentence(review.Status, *review.TerminalReason)
		if phase := failedPhase(review); phase != "" {
			var err error
			page.FailedPhase = phase
			page.FinalLog, err = s.finalLog(r.Context(), token, id, phase)
			page.FinalLogUnavailable = err != nil
		}
	}
	page.Author = s.actorNames(r.Context(), token).of(review.CreatedBy.Kind, review.CreatedBy.ID)
	page.Downloads = s.downloadsOf(r.Context(), token, review)
	f.Title, f.Page = titleOf(review), page
	s.render(w, r, http.StatusOK, "run.html", f)
}

// endedFor reports whether the page explains why the run ended: only a run
// in a terminal status with a recorded reason. A run in recovery carries
// the reason its apply stopped (worker_lost) but has not ended: the
// recovery panel speaks for it, and no log tail is fetched.
func endedFor(r runReview) bool {
	return r.TerminalReason != nil && r.Terminal() && r.Status != "applied" && r.Status != "planned_and_finished"
}

// failedPhase is the phase whose failure ended the run, or "" when the run
// ended otherwise (discarded, canceled, expired, a policy failure): only a
// plan or apply failure shows its log's last lines.
func failedPhase(r runReview) string {
	if r.Status == "canceled" || r.Status == "rejected" || (r.Decision != nil && r.Decision.Action != "approved") {
		return ""
	}
	switch {
	case r.Apply.Status == "errored" || r.Apply.Status == "interrupted":
		return "apply"
	case r.Plan.Status == "errored":
		return "plan"
	}
	return ""
}

func titleOf(r runReview) string {
	if r.Message != "" {
		return r.Message
	}
	return "Run " + r.ID
}

// stagesOf derives the plan, policy, approval and apply stages from the
// review's recorded facts. Durations come from the phase attempts' own
// start and finish times where recorded, else from the status timestamps;
// an unfinished stage counts up to now.
func stagesOf(r runReview) []stage {
	now := time.Now()
	at := func(status string) time.Time { return r.StatusTimestamps[status] }
	span := func(from, to time.Time) time.Duration {
		if from.IsZero() {
			return 0
		}
		if to.IsZero() {
			if terminal(r.Status) {
				return 0
			}
			to = now
		}
		return to.Sub(from)
	}
	planStart, planEnd := phaseSpan(r.Evidence.Attempts, "plan")
	if planStart.IsZero() {
		planStart, planEnd = at("planning"), at(firstSet(r.StatusTimestamps, "awaiting_approval", "policy_override", "planned_and_finished", "errored", "canceled", "policy_soft_failed"))
	}
	plan := stage{Name: "Plan", Phase: "plan", State: phaseState(r.Plan.Status), Duration: span(planStart, planEnd)}
	policy := stage{Name: "Policy", Phase: "policy", State: "pending"}
	switch {
	case r.Policy.Outcome == nil && r.Plan.Status == "finished" && terminal(r.Status):
		policy.State = "failed"
	case r.Policy.Outcome == nil && r.Plan.Status == "finished":
		policy.State = "running"
	case r.Policy.Outcome == nil && terminal(r.Status):
		// Never evaluated: nothing to show, no console.
		policy.State, policy.Phase = "skipped", ""
	case r.Policy.Outcome == nil:
		policy.State = "pending"
	case *r.Policy.Outcome == "pass" || *r.Policy.Outcome == "advisory_failed" || r.Policy.Status == "overridden":
		policy.State = "succeeded"
	case *r.Policy.Outcome == "soft_failed" && !terminal(r.Status):
		policy.State = "waiting"
	default:
		policy.State = "failed"
	}
	if r.Plan.Status == "finished" && !planEnd.IsZero() {
		// Policy runs between the plan's end and the status it decided.
		policy.Duration = span(planEnd, at(firstSet(r.StatusTimestamps, "policy_override", "awaiting_approval", "planned_and_finished", "policy_soft_failed", "errored")))
	}
	policy.Open = r.Policy.Outcome != nil && *r.Policy.Outcome != "pass"
	approval := stage{Name: "Approval", State: "pending"}
	waitingSince := at(firstSet(r.StatusTimestamps, "policy_override", "awaiting_approval"))
	decided := time.Time{}
	if r.Decision != nil {
		decided = r.Decision.DecidedAt
	}
	switch {
	case r.Kind != "plan_and_apply" || (r.Plan.HasChanges != nil && !*r.Plan.HasChanges):
		approval.State = "skipped"
	case r.Decision != nil && r.Decision.Action == "approved":
		approval.State = "succeeded"
		approval.Duration = span(waitingSince, decided)
	case r.Decision != nil:
		approval.State = "failed"
		approval.Duration = span(waitingSince, decided)
	case r.Status == "awaiting_approval" || r.Status == "policy_override":
		approval.State = "waiting"
		approval.Duration = span(waitingSince, time.Time{})
	case terminal(r.Status):
		approval.State = "skipped"
		approval.Duration = span(waitingSince, r.UpdatedAt)
	}
	apply := stage{Name: "Apply", Phase: "apply", State: phaseState(r.Apply.Status)}
	if approval.State == "skipped" || (terminal(r.Status) && r.Apply.Status == "pending") {
		apply.State, apply.Phase = "skipped", ""
	}
	applyStart, applyEnd := phaseSpan(r.Evidence.Attempts, "apply")
	if applyStart.IsZero() {
		applyStart, applyEnd = at("applying"), at(firstSet(r.StatusTimestamps, "applied", "errored", "recovery_required", "canceled"))
	}
	apply.Duration = span(applyStart, applyEnd)
	stages := []stage{plan, policy, approval, apply}
	for i := range stages {
		stages[i].Open = stages[i].Open || stages[i].State == "running"
		if stages[i].State == "skipped" {
			stages[i].Duration = 0
		}
	}
	if r.Status == "applied" {
		stages[3].Open = true
	}
	return stages
}

// phaseSpan is when a phase's first attempt started and its last one
// finished (zero while one still runs).
func phaseSpan(attempts []attempt, phase string) (time.Time, time.Time) {
	var start, end time.Time
	for _, a := range attempts {
		if a.Phase != phase || a.StartedAt == nil {
			continue
		}
		if start.IsZero() || a.StartedAt.Before(start) {
			start = *a.StartedAt
		}
		if a.FinishedAt == nil {
			end = time.Time{}
			continue
		}
		if a.FinishedAt.After(end) {
			end = *a.FinishedAt
		}
	}
	return start, end
}

func firstSet(ts map[string]time.Time, names ...string) string {
	for _, n := range names {
		if !ts[n].IsZero() {
			return n
		}
	}
	return ""
}

func phaseState(status string) string {
	switch status {
	case "running":
		return "running"
	case "finished":
		return "succeeded"
	case "errored", "interrupted":
		return "failed"
	case "canceled":
		return "skipped"
	}
	return "pending"
}

// reasonSentence explains a terminal reason code in a sentence.
func reasonSentence(status, reason string) string {
	sentences := map[string]string{
		"policy_hard_failed":              "A hard-mandatory policy failed, so this plan can never be applied.",
		"policy_error":                    "The policy stage could not complete, so the plan cannot be applied.",
		"policy_soft_failed":              "A soft-mandatory policy failed on a run that cannot apply.",
		"rejected":                        "The plan was discarded.",
		"discarded_by_force_execute":      "The run was discarded so that a later run of the workspace could start at once.",
		"canceled":                        "The run was canceled.",
		"approval_deadline_passed":        "Nobody decided before the approval deadline; a new run starts from a push to the tracked branch or from the CLI.",
		"apply_failed":                    "The apply failed without changing state.",
		"plan_failed":                     "The plan failed.",
		"state_publication_unverified":    "The apply finished but its state could not be verified.",
		"apply_failed_with_partial_state": "The apply failed after publishing part of its state.",
		"worker_lost":                     "The worker running this run stopped.",
		"input_snapshot_unavailable":      "A variable value the run pinned could not be read back.",
		"apply_canceled":                  "The apply was canceled mid-way; the state it left is kept for recovery.",
		"apply_timed_out":                 "The apply ran out of time and was interrupted.",
		"apply_worker_shutdown":           "The apply was interrupted because its worker stopped.",
		"policy_gate_closed":              "The policy gate closed before the apply started (an override expired); nothing was applied.",
		"policy_result_changed":           "The policy result changed after the approval; nothing was applied.",
		"approved_review_changed":         "The run no longer matched the approved review; nothing was applied.",
		"state_changed_since_approval":    "The workspace's state changed after the approval; nothing was applied.",
		"state_changed_since_plan":        "The workspace's state changed after this plan, so it could never apply; it was discarded.",
		"connection_lost":                 "A command of the run lost a connection mid-exchange (an API replica stopping under it, or a network cut); a plan is retried once for it.",
		"plan_attempts_exhausted":         "The plan was cut short too many times: its worker stopped, or a connection it needed was cut off.",
		"credentials_withheld":            "An agent started this run or wrote its configuration, so it planned without the workspace's state, sensitive variables and credentials and cannot apply; run it with credentials to plan and apply it for real.",
		"credential_withheld_untrusted":   "This run's configuration is untrusted, so it is never given credentials.",
		"untrusted_inputs_refused":        "This run's configuration is untrusted and its inputs named a secret, so it did not run.",
	}
	if s, ok := sentences[reason]; ok {
		return s
	}
	if status == "plan_credentials_required" || strings.HasPrefix(reason, "credential_") {
		return "The run's cloud credentials were unavailable (a version revoked, a profile archived or unverified, or a provider switched off); nothing ran with them."
	}
	return "The run ended as " + strings.ReplaceAll(status, "_", " ") + "."
}

// finalLog is at most the last eight lines of one phase's log, read
// server-side. The failed phase is the last to write, so its end is in the
// newest hundred chunks.
func (s *Site) finalLog(ctx context.Context, token, runID, phase string) ([]string, error) {
	var chunks []logChunk
	if err := s.api.Call(ctx, token, http.MethodGet, "/v1/runs/"+url.PathEscape(runID)+"/logs?tail=100", nil, &chunks); err != nil {
		return nil, err
	}
	var text strings.Builder
	for _, c := range chunks {
		if c.Phase == phase {
			text.WriteString(c.Body)
		}
	}
	lines := strings.Split(strings.TrimRight(text.String(), "\n"), "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return nil, nil
	}
	return lines, nil
}

func newKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "dashboard-" + hex.EncodeToString(b)
}

// decide approves or discards exactly the review the page showed: the
// binding comes from the form, so a stale page gets the API's 409.
func (s *Site) decide(w http.ResponseWriter, r *http.Request, token, action string) {
	id := r.PathValue("id")
	var predecessor *string
	if p := r.PostFormValue("predecessor_state_version_id"); p != "" {
		predecessor = &p
	}
	binding := map[string]any{"plan_digest": r.PostFormValue("plan_digest"), "policy_result_digest": r.PostFormValue("policy_result_digest"),
		"predecessor_state_version_id": predecessor, "dependency_lock_digest": r.PostFormValue("dependency_lock_digest")}
	if action == "reject" {
		binding["reason"] = strings.TrimSpace(r.PostFormValue("reason"))
	}
	err := s.api.Mutate(r.Context(), token, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/actions/"+action, newKey(), binding, nil)
	s.afterAction(w, r, token, id, err, map[string]string{"approve": "Plan approved.", "reject": "Run discarded."}[action])
}

func (s *Site) approve(w http.ResponseWriter, r *http.Request, token string) {
	s.decide(w, r, token, "approve")
}

// discard rejects the run with the reason the inline confirmation asked
// for; the API records it with the decision.
func (s *Site) discard(w http.ResponseWriter, r *http.Request, token string) {
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if n := len([]rune(reason)); n < 1 || n > 500 {
		s.renderRun(w, r, token, "Give a reason of 1–500 characters to discard the run.")
		return
	}
	s.decide(w, r, token, "reject")
}

// cancel stops a run that has not finished; the API records who did.
func (s *Site) cancel(w http.ResponseWriter, r *http.Request, token string) {
	id := r.PathValue("id")
	err := s.api.Mutate(r.Context(), token, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/actions/cancel", newKey(), nil, nil)
	s.afterAction(w, r, token, id, err, "Run canceled.")
}

// forceExecute starts a pending run now, discarding the runs ahead of it
// that the page's confirmation named.
func (s *Site) forceExecute(w http.ResponseWriter, r *http.Request, token string) {
	id := r.PathValue("id")
	err := s.api.Mutate(r.Context(), token, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/actions/force-execute", newKey(), nil, nil)
	s.afterAction(w, r, token, id, err, "Run started; the runs ahead of it were discarded.")
}

// release runs an agent's run again as the person's own, with the
// workspace's state, sensitive variables and credentials, and shows the
// new run.
func (s *Site) release(w http.ResponseWriter, r *http.Request, token string) {
	id := r.PathValue("id")
	var released struct {
		ID string `json:"id"`
	}
	err := s.api.Mutate(r.Context(), token, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/actions/release", newKey(), nil, &released)
	if err == nil && released.ID != "" {
		id = released.ID
	}
	s.afterAction(w, r, token, id, err, "Run started with the workspace's state, sensitive variables and credentials.")
}

// recoverRun resolves an uncertain apply with the evidence the page showed,
// after a step-up with the password the form carried.
func (s *Site) recoverRun(w http.ResponseWriter, r *http.Request, token string) {
	id := r.PathValue("id")
	resolution := r.PostFormValue("resolution")
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	switch {
	case resolution != "current_state_verified" && resolution != "import_emergency_state":
		s.renderRun(w, r, token, "Choose how to resolve the recovery.")
		return
	case len([]rune(reason)) < 1 || len([]rune(reason)) > 500:
		s.renderRun(w, r, token, "Give a reason of 1–500 characters for the recovery.")
		return
	case r.PostFormValue("confirm_fence_advance") != "on":
		s.renderRun(w, r, token, "Confirm that the workspace's state moves past the uncertain apply.")
		return
	}
	if err := s.stepUp(r, token); err != nil {
		s.renderRun(w, r, token, stepUpRefusal(err))
		return
	}
	var current *string
	if c := r.PostFormValue("current_state_version_id"); c != "" {
		current = &c
	}
	body := map[string]any{"resolution": resolution, "current_state_version_id": current,
		"current_state_digest": r.PostFormValue("current_state_digest"), "reason": reason, "confirm_fence_advance": true}
	if resolution == "import_emergency_state" {
		body["emergency_state_digest"] = r.PostFormValue("emergency_state_digest")
	}
	if r.PostFormValue("confirm_takeover") == "on" {
		body["confirm_takeover"] = true
	}
	err := s.api.Mutate(r.Context(), token, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/actions/recover", newKey(), body, nil)
	if apiclient.CodeOf(err) == "RUN_RECOVERY_LEASE_HELD" {
		s.renderRunPage(w, r, token, runPage{TakeoverHint: true,
			Notice: "Another administrator holds this recovery. Once their 15-minute lease has expired, you may take it over."})
		return
	}
	s.afterAction(w, r, token, id, err, map[string]string{"current_state_verified": "Recovered: the current state was confirmed.",
		"import_emergency_state": "Recovered: the emergency state is now the workspace's current state."}[resolution])
}

func (s *Site) override(w http.ResponseWriter, r *http.Request, token string) {
	id := r.PathValue("id")
	hours, _ := strconv.Atoi(r.PostFormValue("hours"))
	if hours < 1 || hours > 24 {
		hours = 1
	}
	body := map[string]any{"policy_result_digest": r.PostFormValue("policy_result_digest"),
		"justification": r.PostFormValue("justification"), "expires_at": time.Now().Add(time.Duration(hours) * time.Hour).UTC().Format(time.RFC3339)}
	err := s.api.Mutate(r.Context(), token, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/policy-overrides", newKey(), body, nil)
	s.afterAction(w, r, token, id, err, "Policy result overridden.")
}

// afterAction returns to the run page with a notice: success, or the
// API's refusal explained without its message text.
func (s *Site) afterAction(w http.ResponseWriter, r *http.Request, token, runID string, err error, done string) {
	if err != nil {
		var apiErr *apiclient.Error
		if ok := errors.As(err, &apiErr); ok && apiErr.Status == http.StatusUnauthorized {
			s.unavailable(w, r, s.frame(r, "Run"), err)
			return
		}
		s.renderRun(w, r, token, refusal(err))
		return
	}
	http.Redirect(w, r, "/runs/"+url.PathEscape(runID)+"?notice="+url.QueryEscape(done), http.StatusSeeOther)
}

func refusal(err error) string {
	var apiErr *apiclient.Error
	if !errors.As(err, &apiErr) {
		return "The action failed."
	}
	switch apiErr.Code {
	case "RUN_REVIEW_STALE":
		return "The run changed since this page was loaded; review it again."
	case "RUN_QUEUE_NOT_DISCARDABLE":
		return "A run ahead of this one is queued, running, approved or in recovery and cannot be discarded; wait for it or cancel it."
	case "RUN_POLICY_GATE_CLOSED":
		return "The policy gate is closed: every soft failure needs a current override."
	case "POLICY_RESULT_STALE":
		return "That policy result is no longer current."
	case "VALIDATION_FAILED":
		return "Check the form: a justification of 1–2,000 characters, a reason of 1–500."
	case "RUN_RECOVERY_EVIDENCE_MISMATCH":
		return "The workspace's state changed since this page was loaded; review the evidence again."
	case "REAUTHENTICATION_REQUIRED":
		return "Confirm your password again: this needs a sign-in from the last 15 minutes."
	}
	if apiErr.Status == http.StatusForbidden {
		return "You do not have permission for that action."
	}
	return fmt.Sprintf("The action was refused (%d, request %s).", apiErr.Status, apiErr.RequestID)
}
