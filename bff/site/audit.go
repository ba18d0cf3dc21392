package site

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cairnhq/cairn/bff/apiclient"
)

type auditEvent struct {
	ID     string `json:"id"`
	Action string `json:"action"`
	Actor  struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	} `json:"actor"`
	Target struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	} `json:"target"`
	RequestID string    `json:"request_id"`
	CreatedAt time.Time `json:"created_at"`
	// ActorName is the actor by name where the dashboard can tell.
	ActorName string `json:"-"`
}

// auditPage is one cursor page of the organization's audit log.
type auditPage struct {
	Tab     string
	Events  []auditEvent
	Action  string
	ActorID string
	// Actors are the members and service accounts to filter by.
	Actors  []actorChoice
	Types   []string
	MoreURL string
	Paged   bool
}

type actorChoice struct{ ID, Name string }

// auditTypes are the event types the filter suggests; any exact type may
// be typed in.
var auditTypes = []string{"workspace.created", "workspace.updated", "workspace_variable.created", "workspace_variable.updated",
	"workspace_variable.deleted", "run.created", "run.approved", "run.rejected", "run.canceled", "policy_attachment.created",
	"policy_attachment.deleted", "user_token.created", "user_token.revoked", "service_account.created",
	"service_account_token.issued", "service_account_token.revoked", "credential_profile.archived",
	"credential_profile_version.revoked", "member.role_changed", "member.removed"}

func (s *Site) auditLog(w http.ResponseWriter, r *http.Request, token string) {
	f := s.frame(r, "Audit log")
	q := r.URL.Query()
	page := auditPage{Tab: "audit", Action: strings.TrimSpace(q.Get("action")), ActorID: strings.TrimSpace(q.Get("actor_id")), Types: auditTypes}
	filters := url.Values{}
	if page.Action != "" {
		filters.Set("action", page.Action)
	}
	if page.ActorID != "" {
		filters.Set("actor_id", page.ActorID)
	}
	path := "/v1/audit-events?limit=25"
	if len(filters) > 0 {
		path += "&" + filters.Encode()
	}
	if c := q.Get("cursor"); c != "" {
		path += "&cursor=" + url.QueryEscape(c)
		page.Paged = true
	}
	list, err := apiclient.List[auditEvent](r.Context(), s.api, token, path)
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	names := s.actorNames(r.Context(), token)
	for i := range list.Data {
		e := &list.Data[i]
		e.ActorName = names.of(e.Actor.Type, e.Actor.ID)
	}
	for id, name := range names {
		page.Actors = append(page.Actors, actorChoice{ID: id, Name: name})
	}
	sortChoices(page.Actors)
	page.Events = list.Data
	if list.NextCursor != "" {
		next := url.Values{}
		for k, v := range filters {
			next[k] = v
		}
		next.Set("cursor", list.NextCursor)
		page.MoreURL = "/organization/audit?" + next.Encode()
	}
	f.Page = page
	s.render(w, r, http.StatusOK, "org-audit.html", f)
}
