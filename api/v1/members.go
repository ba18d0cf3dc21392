package v1

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/cairnhq/cairn/api/access"
)

// OrganizationMemberView is a member of the organization.
type OrganizationMemberView struct {
	UserID      string `json:"user_id"`
	Email       string `json:"email"`
	Name        string `json:"name"`
	Role        string `json:"role" enum:"owner,admin,writer,reader,member"`
	TeamCount   int    `json:"team_count" doc:"The teams you may see that they are in."`
	JoinedVia   string `json:"joined_via" enum:"password,sso,scim" doc:"How they arrived: a password sign-in (creating the organization or accepting an invitation), an SSO sign-in, or the organization's SCIM client."`
	Deactivated bool   `json:"deactivated" doc:"Their account is deactivated (by SCIM): they cannot sign in and hold no sessions or tokens."`
}

// OrganizationMembersView is the organization's members, oldest first.
type OrganizationMembersView struct {
	Items []OrganizationMemberView `json:"items"`
}

// TeamRefView names a team.
type TeamRefView struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// MemberWorkspaceAccessView is what a member may do in one workspace.
type MemberWorkspaceAccessView struct {
	WorkspaceID   string   `json:"workspace_id"`
	WorkspaceName string   `json:"workspace_name"`
	ProjectID     string   `json:"project_id"`
	Permissions   []string `json:"permissions" doc:"Cairn permission names."`
	Via           []string `json:"via" doc:"What gives the access: their role, or the names of their teams (a team you may not see is \"a secret team\")."`
}

// MemberAccessView is a member's effective access.
type MemberAccessView struct {
	UserID                  string                      `json:"user_id"`
	Email                   string                      `json:"email"`
	Name                    string                      `json:"name"`
	Role                    string                      `json:"role" enum:"owner,admin,writer,reader,member"`
	Teams                   []TeamRefView               `json:"teams" doc:"Their teams you may see."`
	Workspaces              []MemberWorkspaceAccessView `json:"workspaces" doc:"The workspaces they reach that you can read, by name."`
	OrganizationPermissions []string                    `json:"organization_permissions" doc:"What they may do across the organization: their role and their teams' organization access."`
}

type memberPath struct {
	UserID string `path:"userId" maxLength:"64"`
}

func (a *API) registerMembers() {
	tags := []string{"Members"}
	register(a, huma.Operation{
		OperationID: "list-members", Method: http.MethodGet, Path: "/v1/members",
		Summary: "List the organization's members", Tags: tags,
	}, operationOptions{}, func(ctx context.Context, _ *struct{}) (*Single[OrganizationMembersView], error) {
		return single(ctx, a, func(p access.Principal) (OrganizationMembersView, error) {
			members, err := a.deps.Services.Identity.ListMembers(ctx, p)
			if err != nil {
				return OrganizationMembersView{}, err
			}
			counts, err := a.deps.Services.Teams.TeamCounts(ctx, p)
			out := OrganizationMembersView{Items: make([]OrganizationMemberView, 0, len(members))}
			for _, m := range members {
				out.Items = append(out.Items, OrganizationMemberView{UserID: m.UserID, Email: m.Email, Name: m.Name,
					Role: string(m.Role), TeamCount: counts[m.UserID], JoinedVia: string(m.JoinedVia), Deactivated: m.Deactivated})
			}
			return out, err
		})
	})

	register(a, huma.Operation{
		OperationID: "get-member", Method: http.MethodGet, Path: "/v1/members/{userId}",
		Summary: "Read a member's teams and effective access", Tags: tags,
		Description: "Your own, or anyone's with team:manage or member:manage. Derived from their role and their teams' " +
			"grants by the one mapping; only workspaces you can read are listed.",
	}, operationOptions{}, func(ctx context.Context, in *memberPath) (*Single[MemberAccessView], error) {
		return single(ctx, a, func(p access.Principal) (MemberAccessView, error) {
			e, err := a.deps.Services.Teams.EffectiveAccess(ctx, p, in.UserID)
			if err != nil {
				return MemberAccessView{}, err
			}
			out := MemberAccessView{UserID: e.Member.UserID, Email: e.Member.Email, Name: e.Member.Name,
				Role: string(e.Member.Role), Teams: make([]TeamRefView, 0, len(e.Teams)),
				Workspaces:              make([]MemberWorkspaceAccessView, 0, len(e.Workspaces)),
				OrganizationPermissions: e.Organization.Strings()}
			for _, t := range e.Teams {
				out.Teams = append(out.Teams, TeamRefView{ID: t.ID, Name: t.Name})
			}
			for _, w := range e.Workspaces {
				out.Workspaces = append(out.Workspaces, MemberWorkspaceAccessView{WorkspaceID: w.WorkspaceID,
					WorkspaceName: w.WorkspaceName, ProjectID: w.ProjectID, Permissions: w.Permissions.Strings(), Via: w.Via})
			}
			return out, nil
		})
	})
}
