package site

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/bff/apiclient"
)

// Run triggers in the dashboard: the settings page lists a workspace's
// sources and lets an administrator add one from the workspaces they can
// read or remove one; the overview names the workspaces it makes run.

// runTrigger is one trigger as /v1 renders it.
type runTrigger struct {
	ID        string       `json:"id"`
	Workspace workspaceRef `json:"workspace"`
	Source    workspaceRef `json:"source"`
	CreatedAt time.Time    `json:"created_at"`
}

// runTriggers are a workspace's triggers both ways.
type runTriggers struct {
	Inbound  []runTrigger `json:"inbound"`
	Outbound []runTrigger `json:"outbound"`
}

// runTriggersSection is the settings page's "Run triggers" section.
type runTriggersSection struct {
	runTriggers
	// Candidates are the readable workspaces that could become a source:
	// not this one and not a source already (cycles are the API's to
	// refuse). Empty unless the caller administers the workspace.
	Candidates  []workspaceRef
	CanManage   bool
	Unavailable bool
}

func runTriggersPath(workspaceID string) string {
	return "/v1/workspaces/" + url.PathEscape(workspaceID) + "/run-triggers"
}

// loadRunTriggers reads a workspace's triggers; a failure leaves the
// section unavailable rather than the page.
func (s *Site) loadRunTriggers(ctx context.Context, token string, sh *workspaceShell) runTriggersSection {
	var sec runTriggersSection
	if err := s.api.Call(ctx, token, http.MethodGet, runTriggersPath(sh.Workspace.ID), nil, &sec.runTriggers); err != nil {
		return runTriggersSection{Unavailable: true}
	}
	sec.CanManage = sh.Caller.Can(string(access.PermWorkspaceAdmin))
	if !sec.CanManage {
		return sec
	}
	workspaces, err := s.reachableWorkspaces(ctx, token)
	if err != nil {
		return runTriggersSection{Unavailable: true}
	}
	for _, w := range workspaces {
		if w.ID != sh.Workspace.ID && !slices.ContainsFunc(sec.Inbound, func(t runTrigger) bool { return t.Source.ID == w.ID }) {
			sec.Candidates = append(sec.Candidates, w)
		}
	}
	return sec
}

// outboundTriggers names the workspaces a workspace makes run, for its
// overview; nil when they cannot be read.
func (s *Site) outboundTriggers(ctx context.Context, token, workspaceID string) []runTrigger {
	var ts runTriggers
	if err := s.api.Call(ctx, token, http.MethodGet, runTriggersPath(workspaceID), nil, &ts); err != nil {
		return nil
	}
	return ts.Outbound
}

// runTriggerRefusals say in words why the API refused a source.
var runTriggerRefusals = map[string]string{
	"RUN_TRIGGER_SELF":          "A workspace cannot be its own source.",
	"RUN_TRIGGER_EXISTS":        "That workspace is a source already.",
	"RUN_TRIGGER_LIMIT_REACHED": "A workspace can have at most 20 sources.",
	"RUN_TRIGGER_CYCLE":         "That source would make a loop: this workspace already makes it run, directly or through others.",
}

// addRunTrigger adds the chosen source.
func (s *Site) addRunTrigger(w http.ResponseWriter, r *http.Request, token string) {
	body := map[string]string{"source_workspace_id": r.PostFormValue("source_workspace_id")}
	err := s.api.Mutate(r.Context(), token, http.MethodPost, runTriggersPath(r.PathValue("id")), newKey(), body, nil)
	s.afterRunTriggerChange(w, r, token, err, "trigger-added")
}

// removeRunTrigger removes one source.
func (s *Site) removeRunTrigger(w http.ResponseWriter, r *http.Request, token string) {
	err := s.api.Mutate(r.Context(), token, http.MethodDelete, "/v1/run-triggers/"+url.PathEscape(r.PathValue("triggerId")), newKey(), nil, nil)
	s.afterRunTriggerChange(w, r, token, err, "trigger-removed")
}

func (s *Site) afterRunTriggerChange(w http.ResponseWriter, r *http.Request, token string, err error, done string) {
	if err == nil {
		backTo(w, r, "settings", done)
		return
	}
	if message, ok := runTriggerRefusals[apiclient.CodeOf(err)]; ok {
		s.showWorkspaceTab(w, r, token, "settings", s.loadSettings, http.StatusUnprocessableEntity, message)
		return
	}
	s.refused(w, r, token, "settings", s.loadSettings, err)
}
