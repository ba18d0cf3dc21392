package tfe_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
)

// membershipDocument is one organization membership with what it
// includes and the invitation token a create carries.
type membershipDocument struct {
	Data struct {
		ID            string         `json:"id"`
		Type          string         `json:"type"`
		Attributes    map[string]any `json:"attributes"`
		Relationships map[string]struct {
			Data json.RawMessage `json:"data"`
		} `json:"relationships"`
	} `json:"data"`
	Included []struct {
		ID         string         `json:"id"`
		Type       string         `json:"type"`
		Attributes map[string]any `json:"attributes"`
	} `json:"included"`
	Meta struct {
		InvitationToken string `json:"invitation-token"`
	} `json:"meta"`
}

func membershipDoc(email string, teamIDs ...string) map[string]any {
	teams := []map[string]string{}
	for _, id := range teamIDs {
		teams = append(teams, map[string]string{"type": "teams", "id": id})
	}
	return map[string]any{"data": map[string]any{"type": "organization-memberships",
		"attributes":    map[string]any{"email": email},
		"relationships": map[string]any{"teams": map[string]any{"data": teams}}}}
}

func membershipRefs(d membershipDocument, name string) []string {
	var refs []struct{ ID string }
	_ = json.Unmarshal(d.Data.Relationships[name].Data, &refs)
	var out []string
	for _, r := range refs {
		out = append(out, r.ID)
	}
	return out
}

// teamMembershipIDs reads a team's organization-memberships and users
// relationships.
func teamMembershipIDs(t *testing.T, u *cloudUser, teamID string) (memberships, users []string) {
	t.Helper()
	var d membershipDocument
	u.call(t, http.MethodGet, "/api/v2/teams/"+teamID+"?include=organization-memberships", nil).MustStatus(t, http.StatusOK).JSON(t, &d)
	return membershipRefs(d, "organization-memberships"), membershipRefs(d, "users")
}

// TestOrganizationMembershipsThroughTheRemoteBackendAPI walks go-tfe's
// membership calls: the creator is an active member, an invitation by
// e-mail is an invited membership whose create answer includes its user
// and reads back the same with include=user, the list filters by e-mail,
// status and query and pages, an invalid include is refused, and deleting
// the invitation revokes it. A member who does not manage members cannot
// invite nor see invitations, and another organization's membership is
// not found.
func TestOrganizationMembershipsThroughTheRemoteBackendAPI(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Members")
	base := "/api/v2/organizations/" + u.org + "/organization-memberships"

	var list listDocument
	u.call(t, http.MethodGet, base, nil).MustStatus(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].Attributes["status"] != "active" || list.Data[0].Attributes["email"] != u.Email {
		t.Fatalf("creator: %+v", list)
	}
	ownerID := list.Data[0].ID

	teamID := decode(t, u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/teams",
		teamDoc(map[string]any{"name": "ops"})).MustStatus(t, http.StatusCreated)).Data.ID
	email := "Invitee@Example.com"
	r := u.call(t, http.MethodPost, base, membershipDoc(email, teamID)).MustStatus(t, http.StatusCreated)
	var created membershipDocument
	r.JSON(t, &created)
	if created.Data.Attributes["status"] != "invited" || created.Data.Attributes["email"] != "invitee@example.com" ||
		!strings.HasPrefix(created.Data.ID, "ou-") || len(created.Included) != 1 || created.Included[0].Type != "users" ||
		!strings.HasPrefix(created.Meta.InvitationToken, "cit_") {
		t.Fatalf("created: %s", r.Body)
	}
	if teams := membershipRefs(created, "teams"); len(teams) != 1 || teams[0] != teamID {
		t.Fatalf("created teams: %v", teams)
	}
	var read membershipDocument
	u.call(t, http.MethodGet, "/api/v2/organization-memberships/"+created.Data.ID+"?include=user", nil).MustStatus(t, http.StatusOK).JSON(t, &read)
	created.Meta = read.Meta
	if a, b := mustJSON(t, created), mustJSON(t, read); a != b {
		t.Fatalf("read differs from create:\n%s\n%s", b, a)
	}
	if r := u.call(t, http.MethodGet, "/api/v2/organization-memberships/"+created.Data.ID+"?include=users", nil); r.Status != http.StatusBadRequest ||
		!strings.Contains(string(r.Body), "include parameter") {
		t.Fatalf("include=users = %d %s", r.Status, r.Body)
	}
	if r := u.call(t, http.MethodPost, base, membershipDoc("not-an-email-address")); r.Status < 400 || r.Status >= 500 {
		t.Fatalf("bad e-mail = %d %s", r.Status, r.Body)
	}
	if memberships, _ := teamMembershipIDs(t, u, teamID); len(memberships) != 1 || memberships[0] != created.Data.ID {
		t.Fatalf("team holds the invitation: %v", memberships)
	}

	second := decode(t, u.call(t, http.MethodPost, base, membershipDoc("second@example.com")).MustStatus(t, http.StatusCreated)).Data.ID
	for query, want := range map[string][]string{
		"":                                  {ownerID, created.Data.ID, second},
		"?filter[status]=invited":           {created.Data.ID, second},
		"?filter[status]=active":            {ownerID},
		"?filter[email]=second@example.com": {second},
		"?filter[email]=second@example.com,invitee@example.com": {created.Data.ID, second},
		"?q=invitee":                     {created.Data.ID},
		"?page[number]=2&page[size]=2":   {second},
		"?page[number]=999&page[size]=2": nil,
	} {
		u.call(t, http.MethodGet, base+query, nil).MustStatus(t, http.StatusOK).JSON(t, &list)
		var got []string
		for _, d := range list.Data {
			got = append(got, d.ID)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("list %q = %v, want %v", query, got, want)
		}
		if query == "?page[number]=999&page[size]=2" && (list.Meta.Pagination.TotalCount != 3 || list.Meta.Pagination.CurrentPage != 999) {
			t.Errorf("page 999: %+v", list.Meta)
		}
	}
	u.call(t, http.MethodGet, base+"?include=user,teams", nil).MustStatus(t, http.StatusOK).JSON(t, &list)
	if len(list.Included) != 5 { // three users, the owners team and ops
		t.Fatalf("includes: %+v", list.Included)
	}

	// Revoking the invitation takes it out of its team too.
	u.call(t, http.MethodDelete, "/api/v2/organization-memberships/"+created.Data.ID, nil).MustStatus(t, http.StatusNoContent)
	u.call(t, http.MethodGet, "/api/v2/organization-memberships/"+created.Data.ID, nil).MustStatus(t, http.StatusNotFound)
	if memberships, _ := teamMembershipIDs(t, u, teamID); len(memberships) != 0 {
		t.Fatalf("team after revocation: %v", memberships)
	}

	// A writer reads members but neither invites nor sees invitations.
	_, writerToken := joinWithToken(t, env, u, "Writer", "writer")
	if r := callWith(t, env, writerToken, http.MethodPost, base, membershipDoc("third@example.com")); r.Status != http.StatusForbidden {
		t.Fatalf("writer invite = %d %s", r.Status, r.Body)
	}
	callWith(t, env, writerToken, http.MethodGet, base+"?filter[status]=invited", nil).MustStatus(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 0 {
		t.Fatalf("writer sees invitations: %+v", list.Data)
	}
	if r := callWith(t, env, writerToken, http.MethodGet, "/api/v2/organization-memberships/"+second, nil); r.Status != http.StatusNotFound {
		t.Fatalf("writer reads an invitation = %d %s", r.Status, r.Body)
	}

	// Another organization's membership is not found, for reads and
	// deletes alike, and stays.
	other := newCloudUser(t, env, "Other")
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		if r := other.call(t, method, "/api/v2/organization-memberships/"+second, nil); r.Status != http.StatusNotFound {
			t.Fatalf("other tenant %s = %d %s", method, r.Status, r.Body)
		}
	}
	if r := other.call(t, http.MethodGet, base, nil); r.Status != http.StatusNotFound {
		t.Fatalf("other tenant list = %d %s", r.Status, r.Body)
	}
	u.call(t, http.MethodGet, "/api/v2/organization-memberships/"+second, nil).MustStatus(t, http.StatusOK)
}

// TestInvitedMembershipJoinsItsTeamsOnAcceptance: an invitation put in a
// team through relationships/organization-memberships becomes a team
// membership in the accepting transaction and keeps its membership ID;
// canceling an invitation (by the identity route, the one path both
// surfaces share) takes it out of its teams.
func TestInvitedMembershipJoinsItsTeamsOnAcceptance(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Accept")
	base := "/api/v2/organizations/" + u.org + "/organization-memberships"
	teamID := decode(t, u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/teams",
		teamDoc(map[string]any{"name": "platform"})).MustStatus(t, http.StatusCreated)).Data.ID
	invitee := env.SignUp("Invitee")
	var created membershipDocument
	u.call(t, http.MethodPost, base, membershipDoc(invitee.Email)).MustStatus(t, http.StatusCreated).JSON(t, &created)
	ou := created.Data.ID
	add := map[string]any{"data": []map[string]string{{"type": "organization-memberships", "id": ou}}}
	u.call(t, http.MethodPost, "/api/v2/teams/"+teamID+"/relationships/organization-memberships", add).MustStatus(t, http.StatusNoContent)
	if memberships, users := teamMembershipIDs(t, u, teamID); len(memberships) != 1 || memberships[0] != ou || len(users) != 0 {
		t.Fatalf("team before acceptance: %v %v", memberships, users)
	}

	invitationID := strings.SplitN(ou, ".", 2)[1]
	invitee.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/organization/accept-invitation",
		Body: map[string]string{"invitation_id": invitationID, "token": created.Meta.InvitationToken}}).MustStatus(t, http.StatusOK)
	if memberships, users := teamMembershipIDs(t, u, teamID); len(memberships) != 1 || memberships[0] != ou ||
		len(users) != 1 || users[0] != invitee.ID {
		t.Fatalf("team after acceptance: %v %v", memberships, users)
	}
	var read membershipDocument
	u.call(t, http.MethodGet, "/api/v2/organization-memberships/"+ou, nil).MustStatus(t, http.StatusOK).JSON(t, &read)
	var user struct{ ID string }
	_ = json.Unmarshal(read.Data.Relationships["user"].Data, &user)
	if read.Data.ID != ou || read.Data.Attributes["status"] != "active" || user.ID != invitee.ID {
		t.Fatalf("accepted membership: %+v", read.Data)
	}
	if teams := membershipRefs(read, "teams"); len(teams) != 1 || teams[0] != teamID {
		t.Fatalf("accepted membership's teams: %v", teams)
	}
	// The membership ID removes the member from the team, as HCP's does.
	u.call(t, http.MethodDelete, "/api/v2/teams/"+teamID+"/relationships/organization-memberships", add).MustStatus(t, http.StatusNoContent)
	if _, users := teamMembershipIDs(t, u, teamID); len(users) != 0 {
		t.Fatalf("team after removal: %v", users)
	}

	// Canceled on the identity server: gone from the team.
	var inv struct {
		Invitation struct{ ID string } `json:"invitation"`
	}
	u.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/organization/invite-member",
		Body: map[string]string{"email": "later@example.com", "role": "member"}}).MustStatus(t, http.StatusOK).Data(t, &inv)
	later := "ou-" + u.OrganizationID + "." + inv.Invitation.ID
	u.call(t, http.MethodPost, "/api/v2/teams/"+teamID+"/relationships/organization-memberships",
		map[string]any{"data": []map[string]string{{"type": "organization-memberships", "id": later}}}).MustStatus(t, http.StatusNoContent)
	if memberships, _ := teamMembershipIDs(t, u, teamID); len(memberships) != 1 || memberships[0] != later {
		t.Fatalf("team with the second invitation: %v", memberships)
	}
	u.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/organization/cancel-invitation",
		Body: map[string]string{"invitation_id": inv.Invitation.ID}}).MustStatus(t, http.StatusOK)
	if memberships, _ := teamMembershipIDs(t, u, teamID); len(memberships) != 0 {
		t.Fatalf("team after cancellation: %v", memberships)
	}
	if r := u.call(t, http.MethodPost, "/api/v2/teams/"+teamID+"/relationships/organization-memberships",
		map[string]any{"data": []map[string]string{{"type": "organization-memberships", "id": later}}}); r.Status != http.StatusNotFound {
		t.Fatalf("adding a canceled invitation = %d %s", r.Status, r.Body)
	}
}

// TestLastOwnerMembershipCannotBeDeleted: the organization's only owner
// is not removed through /api/v2; a member is.
func TestLastOwnerMembershipCannotBeDeleted(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Owner")
	owner := "ou-" + u.OrganizationID + "." + u.ID
	if r := u.call(t, http.MethodDelete, "/api/v2/organization-memberships/"+owner, nil); r.Status != http.StatusConflict {
		t.Fatalf("delete the last owner = %d %s", r.Status, r.Body)
	}
	u.call(t, http.MethodGet, "/api/v2/organization-memberships/"+owner, nil).MustStatus(t, http.StatusOK)
	member, _ := joinWithToken(t, env, u, "Member", "member")
	var list listDocument
	u.call(t, http.MethodGet, "/api/v2/organizations/"+u.org+"/organization-memberships?filter[email]="+member.Email, nil).
		MustStatus(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 {
		t.Fatalf("member: %+v", list)
	}
	u.call(t, http.MethodDelete, "/api/v2/organization-memberships/"+list.Data[0].ID, nil).MustStatus(t, http.StatusNoContent)
	u.call(t, http.MethodGet, "/api/v2/organization-memberships/"+list.Data[0].ID, nil).MustStatus(t, http.StatusNotFound)
}

// TestOperatorInvitationIsAccepted: the installation operator (go-tfe's
// compat token) invites through /api/v2 although it has no account; the
// invitation names no inviter, is accepted, and the operator can cancel
// another.
func TestOperatorInvitationIsAcceptedThroughMemberships(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Operated")
	base := "/api/v2/organizations/" + u.org + "/organization-memberships"
	invitee := env.SignUp("Invitee")
	var created membershipDocument
	callWith(t, env, apitest.OperatorToken, http.MethodPost, base, membershipDoc(invitee.Email)).
		MustStatus(t, http.StatusCreated).JSON(t, &created)
	invitee.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/organization/accept-invitation",
		Body: map[string]string{"invitation_id": strings.SplitN(created.Data.ID, ".", 2)[1], "token": created.Meta.InvitationToken}}).
		MustStatus(t, http.StatusOK)
	read := decode(t, u.call(t, http.MethodGet, "/api/v2/organization-memberships/"+created.Data.ID, nil).MustStatus(t, http.StatusOK))
	if read.Data.Attributes["status"] != "active" {
		t.Fatalf("accepted: %+v", read.Data)
	}
	other := decode(t, callWith(t, env, apitest.OperatorToken, http.MethodPost, base, membershipDoc("other@example.com")).
		MustStatus(t, http.StatusCreated)).Data.ID
	callWith(t, env, apitest.OperatorToken, http.MethodDelete, "/api/v2/organization-memberships/"+other, nil).MustStatus(t, http.StatusNoContent)
	u.call(t, http.MethodGet, "/api/v2/organization-memberships/"+other, nil).MustStatus(t, http.StatusNotFound)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
