package v1_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/team"
)

// TestServiceAccountTokensStayWithinTheirIssuer: a service-account token
// acts with its own permissions intersected with what its issuer may do
// now, read on every request. Demoting the issuer narrows the token to the
// issuer's team grants, a team grant widens it again (never beyond the
// token's own permissions), and the issuer leaving the organization ends
// it. Service-account tokens authenticate on /api/v2.
func TestServiceAccountTokensStayWithinTheirIssuer(t *testing.T) {
	t.Parallel()
	f := newTeamFixture(t)
	ctx := context.Background()
	issuer := f.env.SignUp("Issuer")
	f.env.Join(f.owner, issuer, "admin")
	proj := newProject(t, f.owner, "P")
	w, other := newWorkspace(t, f.owner, proj, "granted"), newWorkspace(t, f.owner, proj, "other")

	var sa struct{ ID string }
	issuer.Mutate(http.MethodPost, "/v1/service-accounts", map[string]string{"name": "deployer"}).MustStatus(t, http.StatusCreated).Data(t, &sa)
	var tok struct{ ID, Token string }
	issuer.Mutate(http.MethodPost, "/v1/service-accounts/"+sa.ID+"/tokens", map[string]any{
		"permissions": []string{"workspace:read", "run:read", "state:read"},
		"expires_at":  time.Now().Add(time.Hour),
	}).MustStatus(t, http.StatusCreated).Data(t, &tok)
	type permissions struct {
		Data struct {
			Attributes struct {
				Permissions map[string]bool `json:"permissions"`
			} `json:"attributes"`
		} `json:"data"`
	}
	read := func(workspaceID string, want int) permissions {
		t.Helper()
		var out permissions
		resp := f.env.Anonymous().Do(apitest.Request{Method: http.MethodGet, Path: "/api/v2/workspaces/" + workspaceID,
			Header: map[string]string{"Authorization": "Bearer " + tok.Token}}).MustStatus(t, want)
		if want == http.StatusOK {
			resp.JSON(t, &out)
		}
		return out
	}
	read(w.ID, http.StatusOK)
	read(other.ID, http.StatusOK)

	// Demoted to member: the issuer reaches no workspace, nor does the
	// token, which finds it as missing as one that never existed.
	if _, err := f.env.DB.Exec(`UPDATE memberships SET role = 'member' WHERE organization_id = $1 AND user_id = $2`,
		f.owner.OrganizationID, issuer.ID); err != nil {
		t.Fatal(err)
	}
	read(w.ID, http.StatusNotFound)

	// A team grant on one workspace reaches that workspace only, and the
	// token still holds nothing it was not given: the grant writes and
	// applies, the token only reads.
	f.must(f.tx(func(tx *sqlx.Tx) error {
		tm, err := f.teams.Create(ctx, tx, f.admin, team.CreateInput{Name: "deployers"})
		if err != nil {
			return err
		}
		if err := f.teams.AddMembers(ctx, tx, f.admin, tm.ID, []string{issuer.ID}); err != nil {
			return err
		}
		_, err = f.teams.GrantWorkspace(ctx, tx, f.admin, tm.ID, w.ID, team.WorkspaceAccessInput{Access: access.LevelWrite})
		return err
	}))
	perms := read(w.ID, http.StatusOK).Data.Attributes.Permissions
	if !perms["can-read-state-versions"] || perms["can-queue-run"] || perms["can-lock"] || perms["can-update-variable"] {
		t.Fatalf("the token's permissions in the granted workspace are %v, want reads only", perms)
	}
	read(other.ID, http.StatusNotFound)

	// Leaving the organization ends the token.
	if _, err := f.env.DB.Exec(`DELETE FROM memberships WHERE organization_id = $1 AND user_id = $2`,
		f.owner.OrganizationID, issuer.ID); err != nil {
		t.Fatal(err)
	}
	read(w.ID, http.StatusUnauthorized)
}

// TestVariablesNeedVariableRead: a team whose custom access has variables
// none sees the workspace but not its variables (403); read lists them
// with sensitive values withheld; the reader role lists them too.
func TestVariablesNeedVariableRead(t *testing.T) {
	t.Parallel()
	f := newTeamFixture(t)
	ctx := context.Background()
	w := newWorkspace(t, f.owner, newProject(t, f.owner, "P"), "vars")
	f.owner.Mutate(http.MethodPost, "/v1/workspaces/"+w.ID+"/variables",
		map[string]any{"key": "token", "value": "s3cret-value", "sensitive": true}).MustStatus(t, http.StatusCreated)
	reader := f.env.SignUp("Reader")
	f.env.Join(f.owner, reader, "reader")
	reader.Get("/v1/workspaces/"+w.ID+"/variables").MustStatus(t, http.StatusOK)

	var grant team.WorkspaceGrant
	f.must(f.tx(func(tx *sqlx.Tx) error {
		tm, err := f.teams.Create(ctx, tx, f.admin, team.CreateInput{Name: "auditors"})
		if err != nil {
			return err
		}
		if err := f.teams.AddMembers(ctx, tx, f.admin, tm.ID, []string{f.member.ID}); err != nil {
			return err
		}
		grant, err = f.teams.GrantWorkspace(ctx, tx, f.admin, tm.ID, w.ID, team.WorkspaceAccessInput{Access: access.LevelCustom})
		return err
	}))
	f.member.Get("/v1/workspaces/"+w.ID).MustStatus(t, http.StatusOK)
	f.member.Get("/v1/workspaces/"+w.ID+"/variables").MustStatus(t, http.StatusForbidden)

	read := "read"
	f.must(f.tx(func(tx *sqlx.Tx) error {
		_, err := f.teams.UpdateWorkspaceGrant(ctx, tx, f.admin, grant.ID, team.WorkspaceAccessInput{Access: access.LevelCustom, Variables: &read})
		return err
	}))
	body := string(f.member.Get("/v1/workspaces/"+w.ID+"/variables").MustStatus(t, http.StatusOK).Body)
	if !strings.Contains(body, `"token"`) || strings.Contains(body, "s3cret-value") {
		t.Fatalf("variables read back %s", body)
	}
}
