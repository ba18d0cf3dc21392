package site

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"
)

type attachmentView struct {
	ID              string    `json:"id"`
	PolicySetID     string    `json:"policy_set_id"`
	PolicySetName   string    `json:"policy_set_name"`
	PolicyVersionID string    `json:"policy_version_id"`
	VersionNumber   int       `json:"version_number"`
	Scope           string    `json:"scope"`
	EnforcementMode string    `json:"enforcement_mode"`
	CreatedAt       time.Time `json:"created_at"`
}

type publishedVersion struct {
	ID      string
	SetID   string
	SetName string
	Number  int
}

type policySet struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// policiesPage is the policies tab.
type policiesPage struct {
	*workspaceShell
	Attachments []attachmentView
	Published   []publishedVersion
	Sets        []policySet
	Modes       []string
	// ConfirmDetach names the attachment whose detach awaits the second,
	// explicit confirmation.
	ConfirmDetach string
}

func (s *Site) loadPolicies(ctx context.Context, r *http.Request, token string, sh *workspaceShell) (any, error) {
	page := policiesPage{workspaceShell: sh, Modes: []string{"advisory", "soft_mandatory", "hard_mandatory"}}
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/detach") && r.PostFormValue("confirm") != "yes" {
		page.ConfirmDetach = r.PathValue("attachmentId")
	}
	if err := s.api.Call(ctx, token, http.MethodGet, "/v1/workspaces/"+url.PathEscape(sh.Workspace.ID)+"/policy-attachments", nil, &page.Attachments); err != nil {
		return nil, err
	}
	if !sh.Caller.Can("policy:write") {
		return page, nil
	}
	// Writers choose among the organization's sets and published versions;
	// a set or version list that cannot be read fails the page rather than
	// offering a shorter list than exists.
	if err := s.api.Call(ctx, token, http.MethodGet, "/v1/policy-sets", nil, &page.Sets); err != nil {
		return nil, err
	}
	for _, set := range page.Sets {
		var versions []struct {
			ID     string `json:"id"`
			Number int    `json:"number"`
			Status string `json:"status"`
		}
		if err := s.api.Call(ctx, token, http.MethodGet, "/v1/policy-sets/"+url.PathEscape(set.ID)+"/versions", nil, &versions); err != nil {
			return nil, err
		}
		for _, v := range versions {
			if v.Status == "published" {
				page.Published = append(page.Published, publishedVersion{ID: v.ID, SetID: set.ID, SetName: set.Name, Number: v.Number})
			}
		}
	}
	return page, nil
}

// attachPolicy attaches a published version chosen from the form.
func (s *Site) attachPolicy(w http.ResponseWriter, r *http.Request, token string) {
	body := map[string]string{"policy_version_id": r.PostFormValue("policy_version_id"), "enforcement_mode": r.PostFormValue("enforcement_mode")}
	err := s.api.Mutate(r.Context(), token, http.MethodPost, "/v1/workspaces/"+url.PathEscape(r.PathValue("id"))+"/policy-attachments", newKey(), body, nil)
	if err != nil {
		s.refused(w, r, token, "policies", s.loadPolicies, err)
		return
	}
	backTo(w, r, "policies", "policy-attached")
}

// detachPolicy needs a second, explicit confirmation: the first post only
// asks for it.
func (s *Site) detachPolicy(w http.ResponseWriter, r *http.Request, token string) {
	if r.PostFormValue("confirm") != "yes" {
		s.showWorkspaceTab(w, r, token, "policies", s.loadPolicies, http.StatusOK, "")
		return
	}
	err := s.api.Mutate(r.Context(), token, http.MethodDelete,
		"/v1/workspaces/"+url.PathEscape(r.PathValue("id"))+"/policy-attachments/"+url.PathEscape(r.PathValue("attachmentId")), newKey(), nil, nil)
	if err != nil {
		s.refused(w, r, token, "policies", s.loadPolicies, err)
		return
	}
	backTo(w, r, "policies", "policy-detached")
}

// createPolicySet creates a named set to upload versions into.
func (s *Site) createPolicySet(w http.ResponseWriter, r *http.Request, token string) {
	err := s.api.Mutate(r.Context(), token, http.MethodPost, "/v1/policy-sets", newKey(),
		map[string]string{"name": strings.TrimSpace(r.PostFormValue("name"))}, nil)
	if err != nil {
		s.refused(w, r, token, "policies", s.loadPolicies, err)
		return
	}
	backTo(w, r, "policies", "set-created")
}
