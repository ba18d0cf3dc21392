package site

import (
	"bufio"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cairnhq/cairn/bff/apiclient"
)

// credentialVersion is a credential profile version as the API shows it:
// never a secret value.
type credentialVersion struct {
	ID               string            `json:"id"`
	Number           int               `json:"number"`
	Audience         string            `json:"audience"`
	Phase            string            `json:"phase"`
	Configuration    map[string]string `json:"configuration"`
	EnvironmentNames []string          `json:"environment_names"`
	Verified         bool              `json:"verified"`
	Disabled         bool              `json:"disabled"`
	CreatedAt        time.Time         `json:"created_at"`
}

type credentialProfile struct {
	ID               string             `json:"id"`
	Provider         string             `json:"provider"`
	Name             string             `json:"name"`
	State            string             `json:"state"`
	CurrentVersionID *string            `json:"current_version_id"`
	CurrentVersion   *credentialVersion `json:"current_version"`
	Subjects         map[string]string  `json:"subjects"`
	Versions         []credentialVersion
}

type cloudAccessPage struct {
	Workspace struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	Profiles  []credentialProfile
	Providers []string
	Notice    string
	// Confirm names the action ("verify:cpv_…", "revoke:cpv_…",
	// "archive:cpr_…") awaiting its second, explicit confirmation.
	Confirm string
}

func cloudAccessPath(workspaceID string) string {
	return "/workspaces/" + url.PathEscape(workspaceID) + "/settings/cloud-access"
}

func (s *Site) cloudAccess(w http.ResponseWriter, r *http.Request, token string) {
	s.renderCloudAccess(w, r, token, r.URL.Query().Get("notice"), "")
}

// renderCloudAccess shows the workspace's credential profiles with their
// versions: provider, phase, verified and disabled state, and the names a
// generic secret sets — its values are write-only and never shown.
func (s *Site) renderCloudAccess(w http.ResponseWriter, r *http.Request, token, notice, confirm string) {
	id := r.PathValue("id")
	f := s.frame(r, "Cloud access")
	if err := s.probe(r.Context(), token, "/workspaces/"+url.PathEscape(id)); err != nil {
		f.Nav = false
		s.unavailable(w, r, f, err)
		return
	}
	page := cloudAccessPage{Providers: []string{"aws", "gcp", "azure", "generic_secret"}, Notice: notice, Confirm: confirm}
	ctx := r.Context()
	esc := url.PathEscape(id)
	if err := s.api.Call(ctx, token, http.MethodGet, "/v1/workspaces/"+esc, nil, &page.Workspace); err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	profiles, err := apiclient.List[credentialProfile](ctx, s.api, token, "/v1/workspaces/"+esc+"/credential-profiles?limit=100")
	if err != nil {
		s.unavailable(w, r, f, err)
		return
	}
	for _, p := range profiles.Data {
		versions, err := apiclient.List[credentialVersion](ctx, s.api, token, "/v1/credential-profiles/"+url.PathEscape(p.ID)+"/versions?limit=20")
		if err != nil {
			s.unavailable(w, r, f, err)
			return
		}
		p.Versions = versions.Data
		page.Profiles = append(page.Profiles, p)
	}
	f.Title, f.Page = "Cloud access · "+page.Workspace.Name, page
	s.render(w, r, http.StatusOK, "cloud-access.html", f)
}

func (s *Site) createCredentialProfile(w http.ResponseWriter, r *http.Request, token string) {
	id := r.PathValue("id")
	body := map[string]string{"provider": r.PostFormValue("provider"), "name": strings.TrimSpace(r.PostFormValue("name"))}
	if err := s.api.Mutate(r.Context(), token, http.MethodPost, "/v1/workspaces/"+url.PathEscape(id)+"/credential-profiles", newKey(), body, nil); err != nil {
		s.renderCloudAccess(w, r, token, credentialRefusal(err), "")
		return
	}
	http.Redirect(w, r, cloudAccessPath(id)+"?notice="+url.QueryEscape("Profile created as a draft: runs leave it out until a version is verified."), http.StatusSeeOther)
}

// createCredentialVersion writes a version from the form. A generic
// secret's values come from a textarea of NAME=value lines and are never
// shown again.
func (s *Site) createCredentialVersion(w http.ResponseWriter, r *http.Request, token string) {
	id, profile := r.PathValue("id"), r.PathValue("profileId")
	body := map[string]any{"phase": r.PostFormValue("phase"), "audience": strings.TrimSpace(r.PostFormValue("audience"))}
	if r.PostFormValue("provider") == "generic_secret" {
		env := map[string]string{}
		sc := bufio.NewScanner(strings.NewReader(r.PostFormValue("environment")))
		for sc.Scan() {
			name, value, ok := strings.Cut(strings.TrimRight(sc.Text(), "\r"), "=")
			if !ok && strings.TrimSpace(name) == "" {
				continue
			}
			env[strings.TrimSpace(name)] = value
		}
		body["configuration"] = map[string]any{"environment": env}
	} else {
		cfg := map[string]string{}
		for _, field := range []string{"role_arn", "workload_identity_provider", "service_account", "tenant_id", "client_id", "subscription_id"} {
			if v := strings.TrimSpace(r.PostFormValue(field)); v != "" {
				cfg[field] = v
			}
		}
		body["configuration"] = cfg
	}
	if err := s.api.Mutate(r.Context(), token, http.MethodPost, "/v1/credential-profiles/"+url.PathEscape(profile)+"/versions", newKey(), body, nil); err != nil {
		s.renderCloudAccess(w, r, token, credentialRefusal(err), "")
		return
	}
	http.Redirect(w, r, cloudAccessPath(id)+"?notice="+url.QueryEscape("Version written. Verify it to make it current."), http.StatusSeeOther)
}

// credentialAction verifies, revokes or archives after a second, explicit
// confirmation: the first post only asks for it.
func (s *Site) credentialAction(action string) func(http.ResponseWriter, *http.Request, string) {
	return func(w http.ResponseWriter, r *http.Request, token string) {
		id, profile, version := r.PathValue("id"), r.PathValue("profileId"), r.PathValue("versionId")
		target := version
		if action == "archive" {
			target = profile
		}
		if r.PostFormValue("confirm") != "yes" {
			s.renderCloudAccess(w, r, token, "", action+":"+target)
			return
		}
		path := "/v1/credential-profiles/" + url.PathEscape(profile)
		var body any = map[string]any{}
		switch action {
		case "verify":
			path += "/versions/" + url.PathEscape(version) + "/actions/verify"
			body = nil
		case "revoke":
			path += "/versions/" + url.PathEscape(version) + "/actions/revoke"
		default:
			path += "/actions/archive"
		}
		if err := s.api.Mutate(r.Context(), token, http.MethodPost, path, newKey(), body, nil); err != nil {
			s.renderCloudAccess(w, r, token, credentialRefusal(err), "")
			return
		}
		notices := map[string]string{
			"verify":  "Version verified and current: runs created from now on use it.",
			"revoke":  "Version revoked: it is never issued again, and runs that pinned it end plan_credentials_required.",
			"archive": "Profile archived: new runs leave it out; queued runs that pinned it cannot redeem it.",
		}
		http.Redirect(w, r, cloudAccessPath(id)+"?notice="+url.QueryEscape(notices[action]), http.StatusSeeOther)
	}
}

// credentialRefusal explains a refused credential mutation without
// repeating anything the form held.
func credentialRefusal(err error) string {
	var apiErr *apiclient.Error
	if errors.As(err, &apiErr) {
		switch apiErr.Code {
		case "CREDENTIAL_SECRET_VALUE_INVALID":
			return "A secret value holds a NUL character."
		case "CREDENTIAL_PROFILE_PHASE_UNSUPPORTED":
			return "That phase is not available for this provider (generic secrets serve plan and apply only)."
		case "CREDENTIAL_CONFIGURATION_INVALID":
			return "Check the configuration: names are letters, digits and underscores, not ones the runner sets; cloud fields in their documented shape."
		case "CREDENTIAL_PROFILE_ARCHIVED":
			return "The profile is archived."
		case "CREDENTIAL_PROFILE_VERSION_DISABLED":
			return "The version is already revoked."
		case "PAYLOAD_TOO_LARGE":
			return "The secret map is over 64 KiB."
		}
	}
	return refusal(err)
}
