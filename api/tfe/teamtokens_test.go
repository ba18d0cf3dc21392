package tfe_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/apitest"
)

// teamWithToken creates a team in u's organization and a token for it,
// and returns both.
func teamWithToken(t *testing.T, u *cloudUser, name string) (teamID, token string) {
	t.Helper()
	teamID = decode(t, u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/teams",
		teamDoc(map[string]any{"name": name})).MustStatus(t, http.StatusCreated)).Data.ID
	tok := decode(t, u.call(t, http.MethodPost, "/api/v2/teams/"+teamID+"/authentication-token", nil).MustStatus(t, http.StatusCreated))
	token, _ = tok.Data.Attributes["token"].(string)
	if token == "" {
		t.Fatalf("no token in %+v", tok.Data)
	}
	return teamID, token
}

func grantWorkspace(t *testing.T, u *cloudUser, teamID, workspaceID, level string) string {
	t.Helper()
	return decode(t, u.call(t, http.MethodPost, "/api/v2/team-workspaces", map[string]any{"data": map[string]any{
		"type": "team-workspaces", "attributes": map[string]any{"access": level},
		"relationships": map[string]any{
			"team":      map[string]any{"data": map[string]string{"type": "teams", "id": teamID}},
			"workspace": map[string]any{"data": map[string]string{"type": "workspaces", "id": workspaceID}},
		}}}).MustStatus(t, http.StatusCreated)).Data.ID
}

func newWorkspace(t *testing.T, u *cloudUser, name string) string {
	t.Helper()
	return decode(t, u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/workspaces", map[string]any{"data": map[string]any{
		"type": "workspaces", "attributes": map[string]any{"name": name}}}).MustStatus(t, http.StatusCreated)).Data.ID
}

// TestTeamTokensActAsTheirTeam: a team token is shown once, reads back
// without its plaintext, expires two years on unless told otherwise, and
// acts with exactly its team's grants resolved at every request: it reads
// the granted workspace, finds another one missing exactly as a missing
// one is, cannot manage teams, and loses the workspace on the request
// after the grant is revoked. A new token replaces the old one; revoking
// and deleting the team end it.
func TestTeamTokensActAsTheirTeam(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Tokens")
	granted := newWorkspace(t, u, "granted")
	hidden := newWorkspace(t, u, "hidden")
	teamID, token := teamWithToken(t, u, "deployers")
	if !strings.HasPrefix(token, "ctt_") {
		t.Fatalf("token %q", token)
	}

	read := decode(t, u.call(t, http.MethodGet, "/api/v2/teams/"+teamID+"/authentication-token", nil).MustStatus(t, http.StatusOK))
	created, _ := time.Parse(time.RFC3339, read.Data.Attributes["created-at"].(string))
	expires, _ := time.Parse(time.RFC3339, read.Data.Attributes["expired-at"].(string))
	if read.Data.Attributes["token"] != nil || !expires.Equal(created.AddDate(2, 0, 0)) {
		t.Fatalf("read token: %+v", read.Data)
	}
	if by, _ := read.Data.Relationships["created-by"].Data.(map[string]any); by["type"] != "users" || by["id"] != u.ID {
		t.Fatalf("created-by: %+v", read.Data.Relationships)
	}
	byID := decode(t, u.call(t, http.MethodGet, "/api/v2/authentication-tokens/"+read.Data.ID, nil).MustStatus(t, http.StatusOK))
	if byID.Data.ID != read.Data.ID {
		t.Fatalf("by id: %+v", byID.Data)
	}

	// Nothing granted yet: the token reads no workspace, and an existing
	// one answers exactly as a missing one does.
	none := callWith(t, env, token, http.MethodGet, "/api/v2/workspaces/ws_missing", nil)
	for _, ws := range []string{granted, hidden} {
		if r := callWith(t, env, token, http.MethodGet, "/api/v2/workspaces/"+ws, nil); r.Status != none.Status || r.Status < 400 {
			t.Fatalf("ungranted workspace = %d %s, missing = %d", r.Status, r.Body, none.Status)
		}
	}
	grant := grantWorkspace(t, u, teamID, granted, "write")
	ws := decode(t, callWith(t, env, token, http.MethodGet, "/api/v2/workspaces/"+granted, nil).MustStatus(t, http.StatusOK))
	perms := ws.Data.Attributes["permissions"].(map[string]any)
	if perms["can-lock"] != true || perms["can-force-unlock"] != false || perms["can-destroy"] != false {
		t.Fatalf("permissions of a write grant: %v", perms)
	}
	hiddenResp := callWith(t, env, token, http.MethodGet, "/api/v2/workspaces/"+hidden, nil)
	missing := callWith(t, env, token, http.MethodGet, "/api/v2/workspaces/ws_missing", nil)
	if hiddenResp.Status != http.StatusNotFound || missing.Status != http.StatusNotFound ||
		decode(t, hiddenResp).Errors[0].Title != decode(t, missing).Errors[0].Title {
		t.Fatalf("ungranted = %d %s, missing = %d %s", hiddenResp.Status, hiddenResp.Body, missing.Status, missing.Body)
	}
	// Only the owners team's token manages teams, whatever its team's
	// flags say.
	u.call(t, http.MethodPatch, "/api/v2/teams/"+teamID, teamDoc(map[string]any{
		"organization-access": map[string]bool{"manage-membership": true, "manage-teams": true}})).MustStatus(t, http.StatusOK)
	if r := callWith(t, env, token, http.MethodPost, "/api/v2/organizations/"+u.org+"/teams", teamDoc(map[string]any{"name": "x"})); r.Status != http.StatusForbidden {
		t.Fatalf("team token creating a team = %d %s", r.Status, r.Body)
	}

	// Revoking the grant narrows the token on the next request.
	u.call(t, http.MethodDelete, "/api/v2/team-workspaces/"+grant, nil).MustStatus(t, http.StatusNoContent)
	callWith(t, env, token, http.MethodGet, "/api/v2/workspaces/"+granted, nil).MustStatus(t, http.StatusNotFound)

	// A new token replaces the old one.
	grantWorkspace(t, u, teamID, granted, "read")
	next := decode(t, u.call(t, http.MethodPost, "/api/v2/teams/"+teamID+"/authentication-token", map[string]any{"data": map[string]any{
		"type": "authentication-tokens", "attributes": map[string]any{"expired-at": "2031-01-02T03:04:05Z"}}}).MustStatus(t, http.StatusCreated))
	if next.Data.Attributes["expired-at"] != "2031-01-02T03:04:05.000Z" {
		t.Fatalf("explicit expiry: %v", next.Data.Attributes)
	}
	nextToken := next.Data.Attributes["token"].(string)
	callWith(t, env, token, http.MethodGet, "/api/v2/workspaces/"+granted, nil).MustStatus(t, http.StatusUnauthorized)
	callWith(t, env, nextToken, http.MethodGet, "/api/v2/workspaces/"+granted, nil).MustStatus(t, http.StatusOK)

	// The organization's token list filters by team name and sorts.
	second, _ := teamWithToken(t, u, "auditors")
	var tokens listDocument
	u.call(t, http.MethodGet, "/api/v2/organizations/"+u.org+"/team-tokens?sort=-expired-at", nil).MustStatus(t, http.StatusOK).JSON(t, &tokens)
	if len(tokens.Data) != 2 || tokens.Data[0].ID != next.Data.ID {
		t.Fatalf("sorted by expiry, latest first: %+v", tokens)
	}
	u.call(t, http.MethodGet, "/api/v2/organizations/"+u.org+"/team-tokens?q=audit", nil).MustStatus(t, http.StatusOK).JSON(t, &tokens)
	if len(tokens.Data) != 1 || tokens.Data[0].Relationships["team"].Data.(map[string]any)["id"] != second {
		t.Fatalf("filtered by team name: %+v", tokens)
	}

	// Another organization cannot see or revoke it.
	other := newCloudUser(t, env, "Others")
	other.call(t, http.MethodGet, "/api/v2/authentication-tokens/"+next.Data.ID, nil).MustStatus(t, http.StatusNotFound)
	other.call(t, http.MethodDelete, "/api/v2/teams/"+teamID+"/authentication-token", nil).MustStatus(t, http.StatusNotFound)

	u.call(t, http.MethodDelete, "/api/v2/teams/"+teamID+"/authentication-token", nil).MustStatus(t, http.StatusNoContent)
	u.call(t, http.MethodDelete, "/api/v2/teams/"+teamID+"/authentication-token", nil).MustStatus(t, http.StatusNotFound)
	callWith(t, env, nextToken, http.MethodGet, "/api/v2/workspaces/"+granted, nil).MustStatus(t, http.StatusUnauthorized)

	// Deleting the team ends its token.
	_, last := teamWithToken(t, u, "short-lived")
	var teams listDocument
	u.call(t, http.MethodGet, "/api/v2/organizations/"+u.org+"/teams?filter[names]=short-lived", nil).MustStatus(t, http.StatusOK).JSON(t, &teams)
	callWith(t, env, last, http.MethodGet, "/api/v2/organizations/"+u.org+"/teams", nil).MustStatus(t, http.StatusOK)
	u.call(t, http.MethodDelete, "/api/v2/teams/"+teams.Data[0].ID, nil).MustStatus(t, http.StatusNoContent)
	callWith(t, env, last, http.MethodGet, "/api/v2/organizations/"+u.org+"/teams", nil).MustStatus(t, http.StatusUnauthorized)

	// A member may not mint a token for a team it is not in.
	_, memberToken := joinWithToken(t, env, u, "Member", "member")
	if r := callWith(t, env, memberToken, http.MethodPost, "/api/v2/teams/"+teamID+"/authentication-token", nil); r.Status != http.StatusNotFound && r.Status != http.StatusForbidden {
		t.Fatalf("member minting another team's token = %d %s", r.Status, r.Body)
	}
}

// TestWorkspaceLockedByATeamToken: a lock a team token takes names the
// team in locked-by; another user's unlock is the 409 go-tfe maps to
// ErrWorkspaceLockedByTeam; the team's token unlocks it, and an admin's
// force-unlock still takes it.
func TestWorkspaceLockedByATeamToken(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Locks")
	ws := newWorkspace(t, u, "locked")
	teamID, token := teamWithToken(t, u, "lockers")
	grantWorkspace(t, u, teamID, ws, "admin")

	locked := decode(t, callWith(t, env, token, http.MethodPost, "/api/v2/workspaces/"+ws+"/actions/lock", nil).MustStatus(t, http.StatusOK))
	if by, _ := locked.Data.Relationships["locked-by"].Data.(map[string]any); by["type"] != "teams" || by["id"] != teamID {
		t.Fatalf("locked-by: %+v", locked.Data.Relationships)
	}
	r := u.call(t, http.MethodPost, "/api/v2/workspaces/"+ws+"/actions/unlock", nil)
	if d := decode(t, r); r.Status != http.StatusConflict || len(d.Errors) != 1 || !strings.Contains(d.Errors[0].Detail, "is locked by Team") {
		t.Fatalf("another user's unlock = %d %s", r.Status, r.Body)
	}
	callWith(t, env, token, http.MethodPost, "/api/v2/workspaces/"+ws+"/actions/unlock", nil).MustStatus(t, http.StatusOK)

	callWith(t, env, token, http.MethodPost, "/api/v2/workspaces/"+ws+"/actions/lock", nil).MustStatus(t, http.StatusOK)
	forced := decode(t, u.call(t, http.MethodPost, "/api/v2/workspaces/"+ws+"/actions/force-unlock", nil).MustStatus(t, http.StatusOK))
	if forced.Data.Attributes["locked"] != false {
		t.Fatalf("force-unlock: %v", forced.Data.Attributes)
	}

	// The audit log names the team token as the team.
	var events []struct {
		Action string `json:"action"`
		Actor  struct {
			Type string `json:"type"`
			ID   string `json:"id"`
		} `json:"actor"`
	}
	u.Get("/v1/audit-events").MustStatus(t, http.StatusOK).Data(t, &events)
	found := false
	for _, e := range events {
		if e.Action == "workspace.locked" && e.Actor.Type == "team" && e.Actor.ID == teamID {
			found = true
		}
	}
	if !found {
		t.Fatalf("no workspace.locked event by the team: %+v", events)
	}
}
