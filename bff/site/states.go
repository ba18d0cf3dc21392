package site

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/cairnhq/cairn/bff/apiclient"
)

// stateVersion is a state version's metadata as the API lists it.
type stateVersion struct {
	ID          string    `json:"id"`
	Number      int       `json:"number"`
	Serial      int64     `json:"serial"`
	SizeBytes   int64     `json:"size_bytes"`
	ToolVersion string    `json:"tool_version"`
	SHA256      string    `json:"sha256"`
	CreatedAt   time.Time `json:"created_at"`
	RunID       *string   `json:"run_id"`
	CreatedBy   struct {
		Kind string `json:"kind"`
		ID   string `json:"id"`
	} `json:"created_by"`
	// Author is who wrote it, by name where the dashboard can tell.
	Author string `json:"-"`
}

// stateOutput is one output; Value is raw JSON, null when sensitive.
type stateOutput struct {
	Name      string          `json:"name"`
	Sensitive bool            `json:"sensitive"`
	Type      json.RawMessage `json:"type"`
	Value     json.RawMessage `json:"value"`
}

// Text is the value as tofu prints an output.
func (o stateOutput) Text() string {
	if o.Sensitive {
		return "(sensitive value)"
	}
	return scalar(decode(o.Value))
}

// Shown is the value as the page prints it: compact JSON, folded when long.
func (o stateOutput) Shown() string {
	const fold = 400
	text := string(o.Value)
	if len(text) > fold {
		return text[:fold] + " … (" + itoaBytes(len(text)) + " in all)"
	}
	return text
}

func (s *Site) outputs(ctx context.Context, token, versionID string) ([]stateOutput, error) {
	var out []stateOutput
	err := s.api.Call(ctx, token, http.MethodGet, "/v1/state-versions/"+url.PathEscape(versionID)+"/outputs", nil, &out)
	return out, err
}

// statesPage is the states tab: one cursor page of the history, and the
// outputs of the selected version.
type statesPage struct {
	*workspaceShell
	Versions []stateVersion
	MoreURL  string
	FirstURL string
	Paged    bool
	Selected *stateVersion
	Outputs  []stateOutput
	// SelectURL is the link prefix that selects a version on this page.
	SelectURL string
}

func (s *Site) loadStates(ctx context.Context, r *http.Request, token string, sh *workspaceShell) (any, error) {
	base := "/workspaces/" + url.PathEscape(sh.Workspace.ID) + "/states"
	page := statesPage{workspaceShell: sh, FirstURL: base}
	q := r.URL.Query()
	path := "/v1/workspaces/" + url.PathEscape(sh.Workspace.ID) + "/state-versions?limit=20"
	page.SelectURL = base + "?"
	if c := q.Get("cursor"); c != "" {
		path += "&cursor=" + url.QueryEscape(c)
		page.Paged = true
		page.SelectURL = base + "?cursor=" + url.QueryEscape(c) + "&"
	}
	list, err := apiclient.List[stateVersion](ctx, s.api, token, path)
	if err != nil {
		return nil, err
	}
	page.Versions = list.Data
	if list.NextCursor != "" {
		page.MoreURL = base + "?cursor=" + url.QueryEscape(list.NextCursor)
	}
	names := s.actorNames(ctx, token)
	for i := range page.Versions {
		v := &page.Versions[i]
		v.Author = names.of(v.CreatedBy.Kind, v.CreatedBy.ID)
	}
	want := q.Get("version")
	for i := range page.Versions {
		if page.Versions[i].ID == want || (want == "" && i == 0) {
			page.Selected = &page.Versions[i]
			break
		}
	}
	if page.Selected != nil {
		if page.Outputs, err = s.outputs(ctx, token, page.Selected.ID); err != nil {
			return nil, err
		}
	}
	return page, nil
}

// actorNames turns actor IDs into the names people gave them: members and
// service accounts. Names are a courtesy: when a list cannot be read
// (service accounts need service_account:manage) the ID is shown instead.
type actorNames map[string]string

func (s *Site) actorNames(ctx context.Context, token string) actorNames {
	names := actorNames{}
	var members []struct {
		UserID string `json:"user_id"`
		Name   string `json:"name"`
		Email  string `json:"email"`
	}
	if s.api.Call(ctx, token, http.MethodGet, "/api/auth/organization/list-members", nil, &members) == nil {
		for _, m := range members {
			names[m.UserID] = m.Name
			if m.Name == "" {
				names[m.UserID] = m.Email
			}
		}
	}
	if accounts, err := apiclient.List[serviceAccount](ctx, s.api, token, "/v1/service-accounts?limit=100"); err == nil {
		for _, a := range accounts.Data {
			names[a.ID] = a.Name
		}
	}
	return names
}

// of names an actor: "Ada Lovelace", "service account deploy-bot", or the
// kind and ID when the name is unknown.
func (n actorNames) of(kind, id string) string {
	name, ok := n[id]
	switch {
	case kind == "run":
		return "run " + id
	case ok && kind == "service_account":
		return "service account " + name
	case ok:
		return name
	}
	return labelOf(kind) + " " + id
}
