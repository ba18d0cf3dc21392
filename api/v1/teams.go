package v1

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/cursor"
	"github.com/cairnhq/cairn/api/team"
)

// Teams on /v1 are the /api/v2 teams' twins: the same team service, its
// visibility (a secret team is found only by its members and holders of
// team:read_secret) and its rules for the owners team.

// TeamView is a team.
type TeamView struct {
	ID                 string                    `json:"id" doc:"Team ID (team_…)."`
	Object             string                    `json:"object" enum:"team"`
	Name               string                    `json:"name"`
	Visibility         string                    `json:"visibility" enum:"secret,organization"`
	SSOTeamID          *string                   `json:"sso_team_id" doc:"The identity provider's group ID; null when unset."`
	Owners             bool                      `json:"owners" doc:"The built-in owners team: every permission, never deleted, never empty."`
	OrganizationAccess access.OrganizationAccess `json:"organization_access"`
	MemberCount        int                       `json:"member_count"`
	CreatedAt          time.Time                 `json:"created_at"`
	UpdatedAt          time.Time                 `json:"updated_at"`
}

func teamView(t team.Team) TeamView {
	return TeamView{ID: t.ID, Object: "team", Name: t.Name, Visibility: t.Visibility, SSOTeamID: t.SSOTeamID,
		Owners: t.Owners, OrganizationAccess: t.OrganizationAccess, MemberCount: t.UsersCount,
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
}

// CreateTeamRequest is the body of POST /v1/teams.
type CreateTeamRequest struct {
	Name               string                        `json:"name" minLength:"1" maxLength:"200" doc:"Unique in the organization."`
	Visibility         string                        `json:"visibility,omitempty" enum:"secret,organization" doc:"Omitted: secret."`
	SSOTeamID          *string                       `json:"sso_team_id,omitempty" minLength:"1" maxLength:"200"`
	OrganizationAccess *team.OrganizationAccessPatch `json:"organization_access,omitempty" doc:"Needs team:organization_access."`
}

type createTeamInput struct {
	IdempotencyHeader
	Body CreateTeamRequest
}

// UpdateTeamRequest is the body of PATCH /v1/teams/{id}: omitted fields
// keep their values and organization_access merges flag by flag.
type UpdateTeamRequest struct {
	Name               *string                       `json:"name,omitempty" minLength:"1" maxLength:"200" doc:"The owners team keeps its name."`
	Visibility         *string                       `json:"visibility,omitempty" enum:"secret,organization"`
	SSOTeamID          *string                       `json:"sso_team_id,omitempty" maxLength:"200" doc:"An empty string clears it."`
	OrganizationAccess *team.OrganizationAccessPatch `json:"organization_access,omitempty" doc:"Needs team:organization_access; not settable on the owners team."`
}

type updateTeamInput struct {
	IdempotencyHeader
	IDPath
	Body UpdateTeamRequest
}

type deleteTeamInput struct {
	IdempotencyHeader
	IDPath
}

type listTeamsInput struct {
	ListParams
	Query string `query:"q" maxLength:"200" doc:"Only teams whose name contains this, ignoring case."`
}

// TeamMemberView is a member of a team.
type TeamMemberView struct {
	UserID string `json:"user_id"`
	Email  string `json:"email"`
	Name   string `json:"name"`
	Role   string `json:"role" enum:"owner,admin,writer,reader,member" doc:"Their baseline role in the organization."`
}

func teamMemberView(m team.Member) TeamMemberView {
	return TeamMemberView{UserID: m.UserID, Email: m.Email, Name: m.Name, Role: string(m.Role)}
}

// TeamMembersView is a team's members, by e-mail.
type TeamMembersView struct {
	Items []TeamMemberView `json:"items"`
}

// AddTeamMembersRequest is the body of POST /v1/teams/{id}/members.
type AddTeamMembersRequest struct {
	UserIDs []string `json:"user_ids" minItems:"1" maxItems:"100" doc:"Members of the organization; anyone else is not found."`
}

type addTeamMembersInput struct {
	IdempotencyHeader
	IDPath
	Body AddTeamMembersRequest
}

type removeTeamMemberInput struct {
	IdempotencyHeader
	IDPath
	UserID string `path:"userId" maxLength:"64"`
}

var teamList = listSpec{endpoint: "teams", invalidCode: "TEAM_LIST_CURSOR_INVALID"}

func (a *API) registerTeams() {
	tags := []string{"Teams"}
	register(a, huma.Operation{
		OperationID: "list-teams", Method: http.MethodGet, Path: "/v1/teams",
		Summary: "List the teams you may see, newest first", Tags: tags,
		Description: "Secret teams are listed only to their members and to holders of team:read_secret.",
	}, operationOptions{}, func(ctx context.Context, in *listTeamsInput) (*Listed[TeamView], error) {
		return listOf(ctx, a, teamList, "q="+in.Query, in.ListParams, func(p access.Principal, page cursor.Page) ([]TeamView, error) {
			rows, err := a.deps.Services.Teams.List(ctx, p, team.ListFilter{Query: in.Query, Page: &page})
			return mapSlice(rows, teamView), err
		}, func(v TeamView) cursor.Position { return cursor.Position{CreatedAt: v.CreatedAt, ID: v.ID} })
	})

	register(a, huma.Operation{
		OperationID: "create-team", Method: http.MethodPost, Path: "/v1/teams",
		Summary: "Create a team", Tags: tags, DefaultStatus: http.StatusCreated,
		Description: "Needs team:manage; organization_access also needs team:organization_access. The creator is not added.",
	}, operationOptions{mutation: true, admit: admitOrganization}, func(ctx context.Context, in *createTeamInput) (*Mutated[TeamView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusCreated,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (TeamView, error) {
				t, err := a.deps.Services.Teams.Create(ctx, tx, p, team.CreateInput{Name: in.Body.Name,
					Visibility: in.Body.Visibility, SSOTeamID: in.Body.SSOTeamID, OrganizationAccess: organizationAccessPatch(in.Body.OrganizationAccess)})
				return teamView(t), err
			})
	})

	register(a, huma.Operation{
		OperationID: "get-team", Method: http.MethodGet, Path: "/v1/teams/{id}",
		Summary: "Read a team", Tags: tags,
	}, operationOptions{}, func(ctx context.Context, in *IDPath) (*Single[TeamView], error) {
		return single(ctx, a, func(p access.Principal) (TeamView, error) {
			t, err := a.deps.Services.Teams.Get(ctx, p, in.ID)
			return teamView(t), err
		})
	})

	register(a, huma.Operation{
		OperationID: "update-team", Method: http.MethodPatch, Path: "/v1/teams/{id}",
		Summary: "Change a team", Tags: tags,
		Description: "Needs team:manage. Omitted fields keep their values; organization_access merges flag by flag.",
	}, operationOptions{mutation: true, admit: admitOrganization}, func(ctx context.Context, in *updateTeamInput) (*Mutated[TeamView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (TeamView, error) {
				change := team.UpdateInput{Name: in.Body.Name, Visibility: in.Body.Visibility,
					OrganizationAccess: organizationAccessPatch(in.Body.OrganizationAccess)}
				if sso := in.Body.SSOTeamID; sso != nil && *sso == "" {
					change.ClearSSOTeamID = true
				} else {
					change.SSOTeamID = sso
				}
				t, err := a.deps.Services.Teams.Update(ctx, tx, p, in.ID, change)
				if err != nil {
					return TeamView{}, err
				}
				// The count as it stands after the change.
				t, err = team.TeamIn(ctx, tx, p.OrganizationID, t.ID)
				return teamView(t), err
			})
	})

	// Deleting a team only narrows access: like every revocation it is
	// never held back by launch control.
	register(a, huma.Operation{
		OperationID: "delete-team", Method: http.MethodDelete, Path: "/v1/teams/{id}",
		Summary: "Delete a team with its members and grants", Tags: tags,
		Description: "Needs team:manage. The owners team cannot be deleted.",
	}, operationOptions{mutation: true, admit: notAdmitted}, func(ctx context.Context, in *deleteTeamInput) (*Mutated[TeamView], error) {
		return mutation(ctx, a, in.IdempotencyKey, struct{}{}, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (TeamView, error) {
				t, err := a.deps.Services.Teams.Delete(ctx, tx, p, in.ID)
				return teamView(t), err
			})
	})

	register(a, huma.Operation{
		OperationID: "list-team-members", Method: http.MethodGet, Path: "/v1/teams/{id}/members",
		Summary: "List a team's members", Tags: tags,
	}, operationOptions{}, func(ctx context.Context, in *IDPath) (*Single[TeamMembersView], error) {
		return single(ctx, a, func(p access.Principal) (TeamMembersView, error) {
			members, err := a.deps.Services.Teams.Members(ctx, p, in.ID)
			return TeamMembersView{Items: mapSlice(members, teamMemberView)}, err
		})
	})

	register(a, huma.Operation{
		OperationID: "add-team-members", Method: http.MethodPost, Path: "/v1/teams/{id}/members",
		Summary: "Add members of the organization to a team", Tags: tags,
		Description: "Needs team:manage; only an owner changes the owners team. Answers the team's members.",
	}, operationOptions{mutation: true, admit: admitOrganization}, func(ctx context.Context, in *addTeamMembersInput) (*Mutated[TeamMembersView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (TeamMembersView, error) {
				if err := a.deps.Services.Teams.AddMembers(ctx, tx, p, in.ID, in.Body.UserIDs); err != nil {
					return TeamMembersView{}, err
				}
				return teamMembersIn(ctx, tx, in.ID)
			})
	})

	register(a, huma.Operation{
		OperationID: "remove-team-member", Method: http.MethodDelete, Path: "/v1/teams/{id}/members/{userId}",
		Summary: "Remove a member from a team", Tags: tags,
		Description: "Needs team:manage; the owners team keeps at least one member. Answers the team's members.",
	}, operationOptions{mutation: true, admit: notAdmitted}, func(ctx context.Context, in *removeTeamMemberInput) (*Mutated[TeamMembersView], error) {
		return mutation(ctx, a, in.IdempotencyKey, struct{}{}, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (TeamMembersView, error) {
				if err := a.deps.Services.Teams.RemoveMembers(ctx, tx, p, in.ID, []string{in.UserID}); err != nil {
					return TeamMembersView{}, err
				}
				return teamMembersIn(ctx, tx, in.ID)
			})
	})
}

// organizationAccessPatch is the flags a request sets; none when it names
// no organization_access.
func organizationAccessPatch(r *team.OrganizationAccessPatch) team.OrganizationAccessPatch {
	if r == nil {
		return team.OrganizationAccessPatch{}
	}
	return *r
}

func teamMembersIn(ctx context.Context, tx *sqlx.Tx, teamID string) (TeamMembersView, error) {
	members, err := team.MembersIn(ctx, tx, teamID)
	return TeamMembersView{Items: mapSlice(members, teamMemberView)}, err
}
