package tfe

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/run"
)

// These queries are the ownership projection of /api/v2 requests: they
// return only organization and workspace identities, bounded to the
// principal's organization unless the principal is the operator or an
// account-wide token, which resolve globally. An account-wide token then
// reaches only an organization its person is a member of, as that
// membership. An empty owner means "unresolved".

func (s *server) project(ctx context.Context, p access.Principal, query string, args ...any) (owner, error) {
	tenant := ""
	if p.Kind != access.KindOperator && !p.Account {
		tenant = p.OrganizationID
		if tenant == "" {
			// Every tenant principal but an account-wide token is bound
			// to an organization; an empty one must never mean "all".
			return owner{}, nil
		}
	}
	// The projection is read with what the guard needs next, in the same
	// round trip: the workspace's project, which decides whether the
	// principal reaches it, and the launch admission facts of the owner.
	var row struct {
		OrganizationID   string `db:"organization_id"`
		OrganizationSlug string `db:"organization_slug"`
		WorkspaceID      string `db:"workspace_id"`
		ProjectID        string `db:"project_id"`
		launch.Facts
	}
	err := s.DB.QueryRowxContext(ctx, `SELECT r.organization_id, r.organization_slug, r.workspace_id,
		COALESCE((SELECT w.project_id FROM workspaces w WHERE w.id = r.workspace_id), '') AS project_id,
		`+launch.FactsColumns("r.organization_id", "r.workspace_id")+`
		FROM (`+query+`) AS r(organization_id, organization_slug, workspace_id)`, append(args, tenant)...).StructScan(&row)
	if errors.Is(err, sql.ErrNoRows) {
		return owner{}, nil
	}
	if err != nil {
		return owner{}, fmt.Errorf("resolving ownership: %w", err)
	}
	o := owner{OrganizationID: row.OrganizationID, OrganizationSlug: row.OrganizationSlug, WorkspaceID: row.WorkspaceID,
		admission: &row.Facts}
	if p.Account {
		if p, err = s.bindAccount(ctx, p, o.OrganizationID); errors.Is(err, fault.ErrNotFound) {
			return owner{}, nil
		} else if err != nil {
			return owner{}, err
		}
	}
	if !reachable(p, o, row.ProjectID) {
		return owner{}, nil
	}
	return o, nil
}

// reachable reports whether the principal's role and teams reach the
// owner's workspace, if it has one. One they do not reach is left
// unresolved, so that it answers exactly as a missing one whatever the
// operation: otherwise an operation refused for a permission held nowhere
// (403) would tell an existing workspace from a missing one (404).
func reachable(p access.Principal, o owner, projectID string) bool {
	if o.WorkspaceID == "" || p.Kind == access.KindOperator || p.WorkspaceScope().All {
		return true
	}
	return p.CanReadWorkspace(o.WorkspaceID, projectID)
}

// runSubjectKey carries a run token's run.TokenSubject from the guard to
// the resolvers.
type runSubjectKey struct{}

// ownSubject is the subject read with p's run token, or nil. A request
// naming the token's own organization or workspace by exactly what the
// lookup read resolves to it without a query (ownWorkspace); any other
// request resolves through its query as for every principal.
func ownSubject(ctx context.Context, p access.Principal) *run.TokenSubject {
	subject, _ := ctx.Value(runSubjectKey{}).(*run.TokenSubject)
	if subject == nil || p.Kind != access.KindRun || p.OrganizationID == "" || p.WorkspaceID == "" ||
		!p.CanReadWorkspace(p.WorkspaceID, p.ProjectID) {
		return nil
	}
	return subject
}

// ownWorkspace is the owner of a run token's own workspace.
func ownWorkspace(p access.Principal, subject *run.TokenSubject) owner {
	return owner{OrganizationID: p.OrganizationID, OrganizationSlug: subject.OrganizationSlug, WorkspaceID: p.WorkspaceID}
}

// namesOwnWorkspace reports whether a path's organization slug and
// workspace name are the run token's own, compared as the queries do:
// o.slug = $1 exactly, lower(w.cloud_name) = lower($2) for ASCII names
// (any other goes through the query).
func namesOwnWorkspace(subject *run.TokenSubject, org, name string) bool {
	return org == subject.OrganizationSlug && asciiEqualFold(name, subject.WorkspaceCloudName)
}

// asciiEqualFold reports whether a and b are equal ignoring ASCII case,
// and are ASCII: PostgreSQL's lower() of other letters depends on the
// database's locale.
func asciiEqualFold(a, b string) bool {
	for _, s := range []string{a, b} {
		for i := range len(s) {
			if s[i] >= utf8.RuneSelf {
				return false
			}
		}
	}
	return strings.EqualFold(a, b)
}

func (s *server) byOrganization(ctx context.Context, c *fiber.Ctx, p access.Principal) (owner, error) {
	if own := ownSubject(ctx, p); own != nil && c.Params("org") == own.OrganizationSlug {
		return owner{OrganizationID: p.OrganizationID, OrganizationSlug: own.OrganizationSlug}, nil
	}
	return s.project(ctx, p, `
		SELECT o.id, o.slug, '' FROM organizations o
		WHERE o.slug = $1 AND ($2 = '' OR o.id = $2)`, c.Params("org"))
}

func (s *server) byWorkspaceName(ctx context.Context, c *fiber.Ctx, p access.Principal) (owner, error) {
	if own := ownSubject(ctx, p); own != nil && namesOwnWorkspace(own, c.Params("org"), c.Params("name")) {
		return ownWorkspace(p, own), nil
	}
	return s.project(ctx, p, `
		SELECT o.id, o.slug, w.id FROM workspaces w JOIN organizations o ON o.id = w.organization_id
		WHERE o.slug = $1 AND lower(w.cloud_name) = lower($2) AND ($3 = '' OR o.id = $3)`, c.Params("org"), c.Params("name"))
}

func (s *server) byWorkspaceID(ctx context.Context, c *fiber.Ctx, p access.Principal) (owner, error) {
	if own := ownSubject(ctx, p); own != nil && c.Params("id") == p.WorkspaceID {
		return ownWorkspace(p, own), nil
	}
	return s.project(ctx, p, `
		SELECT o.id, o.slug, w.id FROM workspaces w JOIN organizations o ON o.id = w.organization_id
		WHERE w.id = $1 AND ($2 = '' OR o.id = $2)`, c.Params("id"))
}

func (s *server) byStateVersion(ctx context.Context, c *fiber.Ctx, p access.Principal) (owner, error) {
	return s.project(ctx, p, `
		SELECT o.id, o.slug, v.workspace_id FROM state_versions v JOIN organizations o ON o.id = v.organization_id
		WHERE v.id = $1 AND ($2 = '' OR o.id = $2)`, c.Params("id"))
}

func (s *server) byOutput(ctx context.Context, c *fiber.Ctx, p access.Principal) (owner, error) {
	return s.project(ctx, p, `
		SELECT o.id, o.slug, v.workspace_id FROM state_version_outputs x
		JOIN state_versions v ON v.id = x.state_version_id
		JOIN organizations o ON o.id = v.organization_id
		WHERE x.id = $1 AND ($2 = '' OR o.id = $2)`, c.Params("id"))
}

// byStateVersionFilter resolves GET /state-versions?filter[organization][name]=…&filter[workspace][name]=….
func (s *server) byStateVersionFilter(ctx context.Context, c *fiber.Ctx, p access.Principal) (owner, error) {
	if own := ownSubject(ctx, p); own != nil && namesOwnWorkspace(own, c.Query("filter[organization][name]"), c.Query("filter[workspace][name]")) {
		return ownWorkspace(p, own), nil
	}
	return s.project(ctx, p, `
		SELECT o.id, o.slug, w.id FROM workspaces w JOIN organizations o ON o.id = w.organization_id
		WHERE o.slug = $1 AND lower(w.cloud_name) = lower($2) AND ($3 = '' OR o.id = $3)`,
		c.Query("filter[organization][name]"), c.Query("filter[workspace][name]"))
}
