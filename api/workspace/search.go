package workspace

import (
	"context"
	"strings"

	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/access"
)

// Search selects workspaces the way the remote-backend API lists them.
// Every field is optional; the empty Search selects every workspace.
type Search struct {
	// Name is a case-insensitive part of the cloud name.
	Name string
	// Wildcard is a cloud-name pattern in which '*' stands for any run of
	// characters ("*-prod", "app-*", "*net*"); without one it is the
	// whole name. Case-insensitive.
	Wildcard string
	// Tags are names a workspace must all hold; ExcludeTags names it must
	// hold none of.
	Tags, ExcludeTags []string
	ProjectID         string
}

// SearchWorkspaces reads the organization's workspaces that in selects
// and the principal can read (its role, teams and token boundaries), by
// cloud name.
func (s *Service) SearchWorkspaces(ctx context.Context, p access.Principal, in Search) ([]Workspace, error) {
	if err := p.Require(access.PermWorkspaceRead); err != nil {
		return nil, err
	}
	scope := p.WorkspaceScope()
	return workspacesByName(ctx, s.db, "searching workspaces", `
		WHERE w.organization_id = $1
		AND ($2 OR w.id = ANY($3::text[]) OR w.project_id = ANY($4::text[]))
		AND ($5 = '' OR w.id = $5) AND ($6 = '' OR w.project_id = $6)
		AND ($7 = '' OR w.project_id = $7)
		AND w.cloud_name ILIKE $8 AND w.cloud_name ILIKE $9
		AND NOT EXISTS (SELECT 1 FROM unnest($10::text[]) AS want(name) WHERE NOT EXISTS (
			SELECT 1 FROM workspace_tag_bindings b JOIN workspace_tags t ON t.id = b.tag_id
			WHERE b.workspace_id = w.id AND t.name = want.name))
		AND NOT EXISTS (SELECT 1 FROM workspace_tag_bindings b JOIN workspace_tags t ON t.id = b.tag_id
			WHERE b.workspace_id = w.id AND t.name = ANY($11::text[]))`,
		p.OrganizationID, scope.All, pq.Array(scope.WorkspaceIDs), pq.Array(scope.ProjectIDs), p.WorkspaceID, p.ProjectID,
		in.ProjectID, "%"+likeEscape(in.Name)+"%", wildcardPattern(in.Wildcard), pq.Array(in.Tags), pq.Array(in.ExcludeTags))
}

// wildcardPattern turns a '*' pattern into a LIKE pattern; the empty
// pattern matches every name.
func wildcardPattern(w string) string {
	if w == "" {
		return "%"
	}
	parts := strings.Split(w, "*")
	for i, part := range parts {
		parts[i] = likeEscape(part)
	}
	return strings.Join(parts, "%")
}

// likeEscape quotes LIKE's special characters (backslash is its escape).
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}
