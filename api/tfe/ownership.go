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
	var o owner
	err := s.DB.QueryRowxContext(ctx, query, append(args, tenant)...).Scan(&o.OrganizationID, &o.OrganizationSlug, &o.WorkspaceID)
	if errors.Is(err, sql.ErrNoRows) {
		return owner{}, nil
	}
	if err != nil {
		return owner{}, fmt.Errorf("resolving ownership: %w", err)
	}
	if p.Account {
		if p, err = s.bindAccount(ctx, p, o.OrganizationID); errors.Is(err, fault.ErrNotFound) {
			return owner{}, nil
		} else if err != nil {
			return owner{}, err
		}
	}
	return s.reachable(ctx, p, o)
}

// reachable leaves a workspace the principal's role and teams do not reach
// unresolved, so that it answers exactly as a missing one whatever the
// operation: otherwise an operation refused for a permission held nowhere
// (403) would tell an existing workspace from a missing one (404).
func (s *server) reachable(ctx context.Context, p access.Principal, o owner) (owner, error) {
	if o.WorkspaceID == "" || p.Kind == access.KindOperator || p.WorkspaceScope().All {
		return o, nil
	}
	var projectID string
	if err := s.DB.GetContext(ctx, &projectID, `SELECT project_id FROM workspaces WHERE id = $1`, o.WorkspaceID); err != nil {
		return owner{}, fmt.Errorf("resolving ownership: %w", err)
	}
	if !p.CanReadWorkspace(o.WorkspaceID, projectID) {
		return owner{}, nil
	}
	return o, nil
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
