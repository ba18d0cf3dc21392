package site

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/bff/apiclient"
)

// The first run without leaving the browser: a new account creates its
// organization, a workspace, connects the OpenTofu CLI with a token minted
// here, and starts runs from the page. Each step's page says what comes
// next.

// welcomePage is /welcome: the next step of a new account.
type welcomePage struct {
	// Step is "organization", "closed", "workspace" or "ready".
	Step         string
	Organization organization
	Workspaces   []workspaceRef
	Projects     []project
	// Invitations are open invitations to the account's address.
	Invitations []invitation
	// InvitationsUnavailable says the invitations could not be read: the
	// page says so rather than implying there are none.
	InvitationsUnavailable bool
	Error                  string
}

// activeOrganization returns the session's active organization, or false
// when it has none.
func (s *Site) activeOrganization(ctx context.Context, token string) (organization, bool, error) {
	var current struct {
		Session struct {
			ActiveOrganizationID *string `json:"active_organization_id"`
		} `json:"session"`
	}
	if err := s.api.Call(ctx, token, http.MethodGet, "/api/auth/get-session", nil, &current); err != nil {
		return organization{}, false, err
	}
	if current.Session.ActiveOrganizationID == nil {
		return organization{}, false, nil
	}
	var orgs []organization
	if err := s.api.Call(ctx, token, http.MethodGet, "/api/auth/organization/list", nil, &orgs); err != nil {
		return organization{}, false, err
	}
	for _, o := range orgs {
		if o.ID == *current.Session.ActiveOrganizationID {
			return o, true, nil
		}
	}
	return organization{}, false, nil
}

func (s *Site) welcome(w http.ResponseWriter, r *http.Request, token string) {
	s.renderWelcome(w, r, token, "")
}

func (s *Site) renderWelcome(w http.ResponseWriter, r *http.Request, token, message string) {
	f := s.frame(r, "Get started")
	page := welcomePage{Error: message}
	org, ok, err := s.activeOrganization(r.Context(), token)
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	if !ok {
		page.Step, f.Title = "organization", "Create your organization"
		if err := s.api.Call(r.Context(), token, http.MethodGet, "/api/auth/organization/list-user-invitations", nil, &page.Invitations); err != nil {
			page.InvitationsUnavailable = true
		}
		f.Page = page
		s.render(w, r, http.StatusOK, "welcome.html", f)
		return
	}
	page.Organization = org
	if err := s.probe(r.Context(), token, ""); err != nil {
		if apiclient.StatusOf(err) != http.StatusServiceUnavailable {
			s.unavailable(w, r, f, err)
			return
		}
		// Admission is closed for the organization (a fresh installation's
		// default): say who opens it, keep the refusal's status.
		var apiErr *apiclient.Error
		if errors.As(err, &apiErr) && apiErr.RetryAfter != "" {
			w.Header().Set("Retry-After", apiErr.RetryAfter)
		}
		page.Step, f.Nav = "closed", false
		f.Page = page
		s.render(w, r, http.StatusServiceUnavailable, "welcome.html", f)
		return
	}
	if page.Workspaces, err = s.reachableWorkspaces(r.Context(), token); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page.Step = "workspace"
	if len(page.Workspaces) > 0 {
		page.Step = "ready"
	}
	if projects, err := apiclient.List[project](r.Context(), s.api, token, "/v1/projects?limit=100"); err == nil {
		page.Projects = projects.Data
	}
	f.Page = page
	s.render(w, r, http.StatusOK, "welcome.html", f)
}

// startPage is /workspaces/{id}/start: connect the CLI and start a run.
type startPage struct {
	Workspace struct {
		ID            string `json:"id"`
		Name          string `json:"name"`
		CloudName     string `json:"cloud_name"`
		ExecutionMode string `json:"execution_mode"`
	}
	Organization organization
	Hostname     string
	// Token is a CLI token minted by this request: shown once, never again.
	Token string
	// HasConfiguration is set when a run exists, so a configuration was
	// uploaded (the New run form runs the newest one).
	HasConfiguration bool
	Can              map[string]bool
	Notice           string
}

// CloudBlock is the terraform block that points the CLI at this workspace.
func (p startPage) CloudBlock() string {
	return "terraform {\n  cloud {\n    hostname     = \"" + p.Hostname + "\"\n    organization = \"" + p.Organization.Slug +
		"\"\n    workspaces {\n      name = \"" + p.Workspace.CloudName + "\"\n    }\n  }\n}\n"
}

func (s *Site) workspaceStart(w http.ResponseWriter, r *http.Request, token string) {
	s.renderStart(w, r, token, startPage{Notice: r.URL.Query().Get("notice")})
}

func (s *Site) renderStart(w http.ResponseWriter, r *http.Request, token string, page startPage) {
	id := r.PathValue("id")
	f := s.frame(r, "Connect and run")
	if err := s.api.Call(r.Context(), token, http.MethodGet, "/v1/workspaces/"+url.PathEscape(id), nil, &page.Workspace); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	org, _, err := s.activeOrganization(r.Context(), token)
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	page.Organization, page.Hostname = org, s.opts.APIURL.Host
	runs, err := apiclient.List[runSummary](r.Context(), s.api, token, "/v1/runs?limit=20&workspace_id="+url.QueryEscape(id))
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	// A speculative run's configuration (the CLI's tofu plan) is only a
	// proposal: New run never plans it, so it does not count.
	page.HasConfiguration = slices.ContainsFunc(runs.Data, func(r runSummary) bool { return r.Kind != "speculative" })
	page.Can = map[string]bool{}
	if c, err := s.caller(r.Context(), token); err == nil {
		page.Can["run"] = c.perms.Has(access.PermRunCreate)
	}
	f.Title, f.Page = "Connect and run · "+page.Workspace.Name, page
	s.render(w, r, http.StatusOK, "workspace-start.html", f)
}

// mintCLIToken creates an API token for the CLI and shows it once, on this
// response only: it is never stored by the dashboard nor shown again.
func (s *Site) mintCLIToken(w http.ResponseWriter, r *http.Request, token string) {
	var issued struct {
		Token string `json:"token"`
	}
	description := "OpenTofu CLI, created in the dashboard " + time.Now().UTC().Format("2006-01-02 15:04 UTC")
	err := s.api.Mutate(r.Context(), token, http.MethodPost, "/v1/user-tokens", newKey(), map[string]string{"description": description}, &issued)
	if err != nil || issued.Token == "" {
		s.renderStart(w, r, token, startPage{Notice: "The token could not be created: " + refusal(err)})
		return
	}
	s.renderStart(w, r, token, startPage{Token: issued.Token})
}

// newRun starts a run from the workspace's newest configuration, or from a
// .tar.gz uploaded with the form, streamed to the API as it arrives
// (streamForm, which checks origin and CSRF itself: the form is multipart).
func (s *Site) newRun(w http.ResponseWriter, r *http.Request, token string) {
	id := r.PathValue("id")
	var cfgID string
	fields, err := s.streamForm(r, "archive", func(_ map[string]string, archive io.Reader) error {
		var err error
		cfgID, err = s.uploadConfiguration(r.Context(), token, id, archive)
		return err
	})
	switch {
	case answerForm(w, err):
		return
	case errors.Is(err, errFormBroken):
		s.renderStart(w, r, token, startPage{Notice: "The form did not arrive whole; try again."})
		return
	case err != nil:
		s.renderStart(w, r, token, startPage{Notice: uploadRefusal(err)})
		return
	}
	kind := fields["kind"]
	if kind != "plan_and_apply" && kind != "plan_only" && kind != "speculative" {
		kind = "plan_and_apply"
	}
	body := map[string]string{"workspace_id": id, "kind": kind, "message": strings.TrimSpace(fields["message"])}
	if cfgID != "" {
		body["configuration_version_id"] = cfgID
	}
	var created struct {
		ID string `json:"id"`
	}
	if err := s.api.Mutate(r.Context(), token, http.MethodPost, "/v1/runs", newKey(), body, &created); err != nil {
		message := refusal(err)
		if apiclient.CodeOf(err) == "CONFIGURATION_VERSION_NOT_UPLOADED" {
			message = "There is no configuration to run yet: choose a .tar.gz, or run tofu apply with the block above (a tofu plan only proposes its configuration and is never applied)."
		}
		s.renderStart(w, r, token, startPage{Notice: message})
		return
	}
	http.Redirect(w, r, "/runs/"+url.PathEscape(created.ID), http.StatusSeeOther)
}

// uploadConfiguration streams one archive part to the API as a new
// configuration version.
func (s *Site) uploadConfiguration(ctx context.Context, token, workspaceID string, archive io.Reader) (string, error) {
	resp, err := s.api.Stream(ctx, token, http.MethodPost, "/v1/workspaces/"+url.PathEscape(workspaceID)+"/configuration-versions",
		"application/gzip", archive, "Idempotency-Key", newKey(), "Accept", "application/json")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var env struct {
		Data struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"data"`
	}
	if err := decodeBounded(resp.Body, &env); err != nil || env.Data.ID == "" {
		return "", &apiclient.Error{Status: http.StatusBadGateway, Code: "UPSTREAM_RESPONSE_INVALID"}
	}
	return env.Data.ID, nil
}

func uploadRefusal(err error) string {
	switch apiclient.StatusOf(err) {
	case http.StatusRequestEntityTooLarge:
		return "That archive is over the 100 MB limit."
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return "That archive was refused: it must be a .tar.gz of the configuration's files, without links or paths outside it."
	}
	return "The upload was refused: " + refusal(err)
}

// decodeBounded decodes a small JSON answer read from a stream.
func decodeBounded(r io.Reader, v any) error {
	return json.NewDecoder(io.LimitReader(r, 64<<10)).Decode(v)
}
