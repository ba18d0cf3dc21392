package site

import (
	"bytes"
	"html/template"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/web"
)

// TestPagesRenderForEveryRole executes the workspace and organization
// templates with representative data for an owner and a reader, so a
// template error fails here rather than as half a page in a browser.
func TestPagesRenderForEveryRole(t *testing.T) {
	t.Parallel()
	now := time.Now()
	value, runID := "eu-central", "run_1"
	for _, role := range []access.Role{access.RoleOwner, access.RoleReader} {
		c := caller{Role: string(role), perms: access.PermissionsOf(role)}
		sh := &workspaceShell{Tab: "overview", Caller: c, Notice: "Saved."}
		sh.Workspace.ID, sh.Workspace.Name = "ws_1", "network"
		sv := stateVersion{ID: "sv_1", Number: 1, Serial: 3, RunID: &runID, Author: "Ada"}
		outputs := []stateOutput{{Name: "cidr", Value: []byte(`"10.0.0.0/16"`)}, {Name: "key", Sensitive: true, Value: []byte("null")}}
		runs := []runSummary{{ID: "run_1", Status: "applied", CreatedAt: now.Add(-time.Hour), UpdatedAt: now}, {ID: "run_2", Status: "planning", CreatedAt: now}}
		pages := map[string]any{
			"workspace-overview.html":   overviewPage{workspaceShell: sh, Chart: chartOf(runs), Recent: runs, Current: &sv, Outputs: outputs},
			"workspace-runs.html":       workspaceRunsPage{workspaceShell: sh, Runs: []workspaceRun{{runSummary: runs[0], Source: "tfe", Author: "Ada"}}, MoreURL: "/x?cursor=a", Paged: true},
			"workspace-states.html":     statesPage{workspaceShell: sh, Versions: []stateVersion{sv}, Selected: &sv, Outputs: outputs},
			"workspace-variables.html":  variablesPage{workspaceShell: sh, Variables: []variable{{ID: "var_1", Key: "region", Value: &value}, {ID: "var_2", Key: "secret", Sensitive: true}}, ConfirmDelete: "var_2"},
			"workspace-policies.html":   policiesPage{workspaceShell: sh, Attachments: []attachmentView{{ID: "pa_1", Scope: "workspace"}}, Sets: []policySet{{ID: "ps_1"}}, Published: []publishedVersion{{ID: "pv_1"}}, Modes: []string{"advisory"}},
			"workspace-settings.html":   settingsPage{workspaceShell: sh, ToolVersions: []toolOption{{Version: "1.10.6", CLI: "tofu", CLIVersion: "1.10.6"}, {Version: "terraform-1.5.7", CLI: "terraform", CLIVersion: "1.5.7"}}, Regions: []string{"us"}, Platforms: []string{"linux_amd64"}, Modes: []string{"remote", "local"}},
			"org-audit.html":            auditPage{Tab: "audit", Events: []auditEvent{{ID: "aud_1", Action: "user_token.created", ActorName: "Ada"}}, Actors: []actorChoice{{"usr_1", "Ada"}}, MoreURL: "/organization/audit?cursor=x"},
			"org-tokens.html":           tokensPage{Tab: "tokens", Tokens: []userToken{{ID: "ut_1", ExpiresAt: &now}, {ID: "ut_2", RevokedAt: &now}}, Created: &createdSecret{ID: "ut_3", Plaintext: "cut_secret", What: "API token"}},
			"org-service-accounts.html": serviceAccountsPage{Tab: "service-accounts", CanManage: c.Can("service_account:manage"), Accounts: []serviceAccount{{ID: "sa_1", Name: "bot"}}},
			"org-service-account.html": serviceAccountPage{Tab: "service-accounts", Account: serviceAccount{ID: "sa_1", Name: "bot"}, Tokens: []serviceAccountToken{
				{ID: "sat_1", Permissions: []string{"workspace:read"}, WorkspaceID: &runID, ExpiresAt: now.Add(time.Hour)},
				{ID: "sat_2", ExpiresAt: now.Add(-time.Hour)}, {ID: "sat_3", ExpiresAt: now.Add(time.Hour), RevokedAt: &now}},
				TokensTruncated: true, Permissions: []string{"workspace:read"}, Lifetimes: tokenLifetimes},
			"org-projects.html":  projectsPage{Tab: "projects", Projects: []project{{ID: "prj_1", Name: "p"}}, Counts: map[string]int{"prj_1": 2}, CanWrite: c.Can("project:write")},
			"org-settings.html":  orgSettingsPage{Tab: "settings", CanManage: c.Can("member:manage"), Modes: []string{"remote", "local"}},
			"organizations.html": organizationsPage{Tab: "general", ActiveID: "org_1", Organizations: []organization{{ID: "org_1", Name: "Acme"}}, Members: []orgMember{{UserID: "usr_2", Email: "b@x", Role: "writer", JoinedVia: "scim", Deactivated: true}, {UserID: "usr_3", Email: "c@x", Role: "member"}}, InviteRoles: inviteRoles(string(role)), ConfirmRemove: "usr_2"},
			"org-sso.html": ssoPage{Tab: "sso", Owner: role == access.RoleOwner, Required: true, ConfirmDelete: "ssop_2", CreatedSCIMToken: "scim_secret",
				SCIM: scimTokenStatus{Exists: true, CreatedAt: &now}, Roles: []string{"member"}, Form: ssoRegistration{Type: "saml", DefaultRole: "member"},
				Providers: []ssoProvider{{ID: "ssop_1", Type: "oidc", Issuer: "https://idp", Domains: []string{"a.example", "b.example"}, CallbackURL: "https://api/cb"},
					{ID: "ssop_2", Type: "saml", Issuer: "urn:idp", SPMetadataURL: "https://api/md", SPEntityID: "urn:sp"}},
				Test: &ssoTestResult{Email: "a@a.example", EmailVerified: true, Groups: []string{"eng"}, Teams: []string{"platform"}}},
			"sign-in.html": signInPage{Next: "/oauth/consent?x=1", Providers: []socialProvider{{ID: "oidc", Name: "Dex"}}, ProvidersUnavailable: true, SSOIdentifier: "acme"},
			"sign-up.html": signInPage{From: "sign-up", Providers: []socialProvider{{ID: "google", Name: "Google"}}},
		}
		for name, page := range pages {
			base, err := template.New("").Funcs(funcs).ParseFS(web.Templates, "templates/layout.html", "templates/partials.html", "templates/"+name)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			var out bytes.Buffer
			f := frame{Title: "t", CSRF: "c", Nav: true, Page: page, Switcher: &switcher{Organizations: []organization{{ID: "org_1", Name: "Acme"}}, ActiveID: "org_1"}}
			if err := base.ExecuteTemplate(&out, "layout", f); err != nil {
				t.Fatalf("%s as %s: %v", name, role, err)
			}
			html := out.String()
			if name == "org-service-account.html" {
				// Only the live token can be revoked; the others say why not.
				if strings.Count(html, "/revoke\"") != 1 || !strings.Contains(html, ">expired<") || !strings.Contains(html, ">revoked<") ||
					!strings.Contains(html, `id="sa-tokens-truncated"`) {
					t.Errorf("the service account page as %s:\n%s", role, html)
				}
			}
			switch name {
			case "organizations.html":
				// Arrival shows when the API says it; a deactivated member is badged.
				if !strings.Contains(html, `<td class="member-arrival">SCIM</td>`) || strings.Count(html, `member-deactivated">Deactivated<`) != 1 {
					t.Errorf("the members as %s:\n%s", role, html)
				}
			case "org-sso.html":
				// Only owners see the providers, the switch and the SCIM token.
				owner := strings.Contains(html, `id="sso-providers"`) && strings.Contains(html, `value="scim_secret"`) &&
					strings.Contains(html, `id="sso-required" name="required" value="true" checked`) && strings.Contains(html, "https://api/cb") &&
					strings.Contains(html, "https://api/md") && strings.Contains(html, `id="sso-test-teams">platform<`) && strings.Contains(html, "Yes, delete")
				if owner != (role == access.RoleOwner) || (role != access.RoleOwner && !strings.Contains(html, `id="sso-owners-only"`)) {
					t.Errorf("the SSO page as %s:\n%s", role, html)
				}
			case "sign-in.html", "sign-up.html":
				if !strings.Contains(html, "Continue with") || !strings.Contains(html, `action="/sign-in/sso"`) {
					t.Errorf("%s:\n%s", name, html)
				}
			}
			if role == access.RoleReader && strings.HasPrefix(name, "workspace-") && name != "workspace-settings.html" &&
				strings.Contains(html, `<main id="main" tabindex="-1">`) && strings.Count(html, `method="post"`) > 2 {
				// The switcher and sign-out are the only posts a reader gets.
				t.Errorf("%s offers a reader %d forms", name, strings.Count(html, `method="post"`)-2)
			}
		}
	}
}
