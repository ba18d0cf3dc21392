package site

import (
	"slices"
	"strconv"
	"time"
)

// approvalEvent is one line of the approval stage's console: when, what
// happened and who did it, from the run's own review.
type approvalEvent struct {
	At   time.Time
	Text string
	// Actor is who decided or overrode ("Text by Actor"), by name or,
	// failing that, ID; empty for what the run did by itself.
	Actor string
	// Then follows the actor.
	Then string
	// Note is what the actor wrote: a discard reason, an override's
	// justification.
	Note string
}

// overrideRecord is one soft override as the review lists it.
type overrideRecord struct {
	PolicyResultID string    `json:"policy_result_id"`
	Justification  string    `json:"justification"`
	ExpiresAt      time.Time `json:"expires_at"`
	ActorKind      string    `json:"actor_kind"`
	ActorID        string    `json:"actor_id"`
	CreatedAt      time.Time `json:"created_at"`
}

// ApprovalEvents is the approval stage's console, oldest first: the run
// waiting for overrides or for approval (with its deadline), each soft
// override, and the decision, or the run expiring undecided. Every line
// derives from a recorded fact of the review; nothing is inferred.
func (r runReview) ApprovalEvents() []approvalEvent {
	var events []approvalEvent
	if at, ok := r.StatusTimestamps["policy_override"]; ok {
		events = append(events, approvalEvent{At: at, Text: "Waiting for policy overrides: a soft-mandatory policy failed, and approval needs each failure overridden first."})
	}
	names := map[string]string{}
	for _, a := range r.Policy.Attachments {
		names[a.ID] = a.PolicySetName + " v" + strconv.Itoa(a.VersionNumber)
	}
	for _, o := range r.Overrides.Records {
		what := names[o.PolicyResultID]
		if what == "" {
			what = o.PolicyResultID
		}
		events = append(events, approvalEvent{At: o.CreatedAt, Text: "Soft failure of " + what + " overridden",
			Actor: o.ActorKind + " " + o.ActorID, Then: "until " + o.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"), Note: o.Justification})
	}
	if at, ok := r.StatusTimestamps["awaiting_approval"]; ok {
		text := "Waiting for approval."
		if r.ApprovalDeadline != nil {
			text = "Waiting for approval until " + r.ApprovalDeadline.UTC().Format("2006-01-02 15:04 UTC") + "; the run expires undecided after that."
		}
		events = append(events, approvalEvent{At: at, Text: text})
	}
	switch d := r.Decision; {
	case d != nil:
		e := approvalEvent{At: d.DecidedAt, Actor: d.ActorID, Text: "Canceled"}
		if d.ActorName != nil && *d.ActorName != "" {
			e.Actor = *d.ActorName
		}
		switch d.Action {
		case "approved":
			e.Text = "Approved"
		case "rejected":
			e.Text = "Discarded"
		}
		if d.Reason != nil {
			e.Note = *d.Reason
		}
		events = append(events, e)
	case r.Status == "expired" && len(events) > 0:
		events = append(events, approvalEvent{At: r.StatusTimestamps["expired"], Text: "Nobody decided before the deadline: the run expired."})
	}
	slices.SortStableFunc(events, func(a, b approvalEvent) int { return a.At.Compare(b.At) })
	return events
}
