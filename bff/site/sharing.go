package site

import (
	"context"
	"net/http"
	"net/url"
	"slices"
)

// remoteStateSharing is with whom a workspace shares its state: the
// runs of every workspace (Global) or of the listed consumers.
type remoteStateSharing struct {
	Global    bool           `json:"global"`
	Consumers []workspaceRef `json:"consumers"`
}

// sharingSection is the settings page's "Remote state sharing" and the
// overview's "Consumed by": the sharing, and the workspaces an admin may
// add. Unavailable hides it when the API refuses the read.
type sharingSection struct {
	remoteStateSharing
	Candidates  []workspaceRef
	Unavailable bool
}

func sharingPath(workspaceID string) string {
	return "/v1/workspaces/" + url.PathEscape(workspaceID) + "/remote-state-sharing"
}

// loadSharing reads a workspace's sharing and, for the settings form,
// the other workspaces it could list.
func (s *Site) loadSharing(ctx context.Context, token, workspaceID string, candidates bool) sharingSection {
	var sec sharingSection
	if err := s.api.Call(ctx, token, http.MethodGet, sharingPath(workspaceID), nil, &sec.remoteStateSharing); err != nil {
		return sharingSection{Unavailable: true}
	}
	if !candidates {
		return sec
	}
	all, err := s.reachableWorkspaces(ctx, token)
	if err != nil {
		return sec
	}
	for _, w := range all {
		listed := slices.ContainsFunc(sec.Consumers, func(c workspaceRef) bool { return c.ID == w.ID })
		if w.ID != workspaceID && !listed {
			sec.Candidates = append(sec.Candidates, w)
		}
	}
	return sec
}

// updateSharing applies one change of the settings form (the global
// switch, or adding or removing one consumer) as a replacement of the
// whole sharing, which the API checks (workspace:admin).
func (s *Site) updateSharing(w http.ResponseWriter, r *http.Request, token string) {
	ctx, workspaceID := r.Context(), r.PathValue("id")
	var current remoteStateSharing
	err := s.api.Call(ctx, token, http.MethodGet, sharingPath(workspaceID), nil, &current)
	if err == nil {
		ids := make([]string, 0, len(current.Consumers)+1)
		for _, c := range current.Consumers {
			if r.PostFormValue("action") != "remove" || c.ID != r.PostFormValue("consumer_id") {
				ids = append(ids, c.ID)
			}
		}
		global := current.Global
		switch r.PostFormValue("action") {
		case "global":
			global = r.PostFormValue("global") == "on"
		case "add":
			ids = append(ids, r.PostFormValue("consumer_id"))
		}
		err = s.api.Mutate(ctx, token, http.MethodPut, sharingPath(workspaceID), newKey(),
			map[string]any{"global": global, "consumer_ids": ids}, nil)
	}
	if err != nil {
		s.refused(w, r, token, "settings", s.loadSettings, err)
		return
	}
	backTo(w, r, "settings", "sharing-saved")
}
