package checkrun

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/cairnhq/cairn/api/run"
)

// Target is the commit a run's check run is published on, as the code-host
// run creation recorded it.
type Target struct {
	InstallationID  int64
	RepositoryID    int64
	RepositoryOwner string
	RepositoryName  string
	// HeadSHA is the full commit SHA the run evaluates.
	HeadSHA string
}

var shaPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)

func (t Target) validate() error {
	switch {
	case t.InstallationID <= 0 || t.RepositoryID <= 0:
		return fmt.Errorf("%w: installation and repository IDs are required", ErrInvalidTarget)
	case t.RepositoryOwner == "" || t.RepositoryName == "" || len(t.RepositoryOwner) > 100 || len(t.RepositoryName) > 100 ||
		strings.ContainsAny(t.RepositoryOwner+t.RepositoryName, "/?#% "):
		return fmt.Errorf("%w: repository owner and name", ErrInvalidTarget)
	case !shaPattern.MatchString(t.HeadSHA):
		return fmt.Errorf("%w: head SHA must be a full lowercase commit SHA", ErrInvalidTarget)
	}
	return nil
}

// Check statuses and conclusions, as the code host spells them.
const (
	StatusQueued     = "queued"
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"

	ConclusionSuccess   = "success"
	ConclusionFailure   = "failure"
	ConclusionNeutral   = "neutral"
	ConclusionCancelled = "cancelled"
)

// Payload is everything a check run says. It is stored as the desired
// state and its digest decides whether anything must be sent.
type Payload struct {
	Name        string     `json:"name"`
	Status      string     `json:"status"`
	Conclusion  string     `json:"conclusion,omitempty"`
	DetailsURL  string     `json:"details_url"`
	StartedAt   *time.Time `json:"started_at,omitempty"`
	CompletedAt *time.Time `json:"completed_at,omitempty"`
	Title       string     `json:"title"`
	Summary     string     `json:"summary"`
}

// digest is the SHA-256 of the payload's JSON (encoding/json writes struct
// fields in a fixed order, so equal payloads have equal digests).
func (p Payload) digest() ([]byte, []byte, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding check payload: %w", err)
	}
	d := sha256.Sum256(b)
	return b, d[:], nil
}

// State maps a run's status to the check's status and conclusion (SPEC §6):
// queued runs are queued; planning, policy, waiting for a decision and
// applying are in progress; a finished plan-only or speculative run and an
// applied run succeed; missing credentials are neutral; failures and policy
// denials fail; canceled, rejected and expired runs are cancelled. An apply
// whose outcome is uncertain stays in progress until recovery resolves it,
// and a recovered run failed: its apply did not complete cleanly.
func State(s run.Status) (status, conclusion string) {
	switch s {
	case run.StatusPending, run.StatusPlanQueued:
		return StatusQueued, ""
	case run.StatusPlanning, run.StatusAwaitingApproval, run.StatusPolicyOverride, run.StatusApplyQueued,
		run.StatusApplying, run.StatusRecoveryRequired:
		return StatusInProgress, ""
	case run.StatusPlannedAndFinished, run.StatusApplied:
		return StatusCompleted, ConclusionSuccess
	case run.StatusCredentialsRequired:
		return StatusCompleted, ConclusionNeutral
	case run.StatusRejected, run.StatusCanceled, run.StatusExpired:
		return StatusCompleted, ConclusionCancelled
	default: // errored, policy_soft_failed, recovered, and anything unknown
		return StatusCompleted, ConclusionFailure
	}
}

var headlines = map[run.Status]string{
	run.StatusPending:             "Queued behind another run",
	run.StatusPlanQueued:          "Plan queued",
	run.StatusPlanning:            "Planning",
	run.StatusAwaitingApproval:    "Plan awaits approval",
	run.StatusPolicyOverride:      "Policy soft-failed: awaiting overrides",
	run.StatusApplyQueued:         "Apply queued",
	run.StatusApplying:            "Applying",
	run.StatusRecoveryRequired:    "Apply outcome uncertain: recovery required",
	run.StatusApplied:             "Applied",
	run.StatusPlannedAndFinished:  "Planned",
	run.StatusErrored:             "Failed",
	run.StatusRejected:            "Rejected",
	run.StatusCanceled:            "Canceled",
	run.StatusExpired:             "Expired without a decision",
	run.StatusRecovered:           "Apply recovered",
	run.StatusCredentialsRequired: "Cloud credentials required",
	run.StatusPolicySoftFailed:    "Policy soft-failed",
}

// payloadOf is the check a run's current state calls for. It carries
// counts, the policy outcome and safe reason codes only: never messages,
// findings, variables or anything else a user wrote.
func payloadOf(r run.Run, name, detailsURL string) Payload {
	status, conclusion := State(r.Status)
	p := Payload{Name: name, Status: status, Conclusion: conclusion, DetailsURL: detailsURL}
	if t, ok := r.StatusTimestamps[string(run.StatusPlanning)]; ok {
		t = t.UTC().Truncate(time.Second)
		p.StartedAt = &t
	}
	if status == StatusCompleted {
		t := r.UpdatedAt.UTC().Truncate(time.Second)
		if at, ok := r.StatusTimestamps[string(r.Status)]; ok {
			t = at.UTC().Truncate(time.Second)
		}
		p.CompletedAt = &t
	}
	headline := headlines[r.Status]
	if headline == "" {
		headline = string(r.Status)
	}
	var lines []string
	if r.ResourceAdditions != nil && r.ResourceChanges != nil && r.ResourceDestructions != nil {
		counts := fmt.Sprintf("%d to add, %d to change, %d to destroy", *r.ResourceAdditions, *r.ResourceChanges, *r.ResourceDestructions)
		headline += ": " + counts
		lines = append(lines, "Plan: "+counts+".")
	} else {
		lines = append(lines, "Plan: not finished.")
	}
	if r.PolicyOutcome != nil {
		lines = append(lines, "Policy: `"+*r.PolicyOutcome+"`.")
	}
	if r.TerminalReason != nil {
		lines = append(lines, "Reason: `"+*r.TerminalReason+"`.")
	}
	lines = append(lines, fmt.Sprintf("Run `%s` (%s): [open in Cairn](%s).", r.ID, r.Kind, detailsURL))
	p.Title, p.Summary = headline, strings.Join(lines, "\n\n")
	return p
}

// heldPayloadOf is the check of a held ingestion: completed, neutral, with
// the caller's explanation and a link to the page where a person can plan
// the commit. It never changes: a run made from the ingestion later has a
// check of its own.
func heldPayloadOf(h Held, name, detailsURL string) Payload {
	at := h.HeldAt.UTC().Truncate(time.Second)
	return Payload{Name: name, Status: StatusCompleted, Conclusion: ConclusionNeutral, DetailsURL: detailsURL,
		CompletedAt: &at, Title: h.Title,
		Summary: h.Summary + "\n\n" + fmt.Sprintf("Source ingestion `%s`: [open in Cairn](%s).", h.IngestionID, detailsURL)}
}
