package tfe

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/identity"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/httpx"
	"github.com/cairnhq/cairn/api/workspace"
)

func (s *server) registerOrganizations(r fiber.Router) {
	r.Post("/organizations", s.createOrganization)
	r.Get("/organizations", s.listOrganizations)
	r.Get("/organizations/:org", s.guard(s.byOrganization, s.readOrganization))
	r.Patch("/organizations/:org", s.guard(s.byOrganization, s.updateOrganization))
	r.Delete("/organizations/:org", s.guardStop(s.byOrganization, s.deleteOrganization))
	r.Get("/organizations/:org/entitlement-set", s.guard(s.byOrganization, s.entitlements))
}

// organizationResource renders an organization with what the caller may do
// in it.
func organizationResource(p access.Principal, o identity.Organization) resource {
	return resource{
		ID:   o.Slug,
		Type: "organizations",
		Attributes: map[string]any{
			"name":        o.Slug,
			"external-id": o.ID,
			"created-at":  timestamp(o.CreatedAt),
			"email":       o.Email,
			// A workspace the CLI creates takes this mode: remote runs
			// managed plans, as HCP Terraform does.
			"default-execution-mode":        o.DefaultExecutionMode,
			"allow-force-delete-workspaces": o.AllowForceDeleteWorkspaces,
			"permissions": map[string]bool{
				"can-create-workspace": p.Require(access.PermWorkspaceWrite) == nil,
				"can-update":           p.Require(access.PermMemberManage) == nil,
				"can-destroy":          canDeleteOrganization(p),
			},
		},
		Links: map[string]string{"self": "/api/v2/organizations/" + o.Slug},
	}
}

// readOrganization answers an organization; include=default-project adds
// its Default Project.
func (s *server) readOrganization(c *fiber.Ctx, p access.Principal, o owner) error {
	if err := p.Require(access.PermOrganizationRead); err != nil {
		return s.writeError(c, err)
	}
	ctx := c.UserContext()
	org, err := s.Identity.OrganizationByID(ctx, o.OrganizationID)
	if err != nil {
		return s.writeError(c, err)
	}
	res := organizationResource(p, org)
	var included []resource
	if includes(c, "default-project") {
		proj, err := s.Workspaces.DefaultProjectOf(ctx, o.OrganizationID)
		if err != nil {
			return s.writeError(c, err)
		}
		// A project the principal cannot read stays out, as a missing one.
		if proj != nil && p.PermissionsOnProject(proj.ID).Has(access.PermProjectRead) {
			res.Relationships = map[string]relationship{"default-project": toOne(proj.ID, "projects")}
			included = append(included, projectResource(p, o, *proj))
		}
	}
	doc := map[string]any{"data": res}
	if len(included) > 0 {
		doc["included"] = included
	}
	return writeDocument(c, http.StatusOK, doc)
}

// listOrganizations lists what the credential can see: every organization
// for the operator (q matches slug or e-mail), those its person is a member
// of for an account-wide token, else its own.
func (s *server) listOrganizations(c *fiber.Ctx) error {
	ctx := c.UserContext()
	p, err := s.authenticate(c)
	if err != nil {
		return s.writeError(c, err)
	}
	if p.Kind != access.KindOperator && !p.Account {
		return s.guard(s.ownOrganization, s.listOwnOrganization)(c)
	}
	if err := httpx.CheckQuery(c); err != nil {
		return s.writeError(c, err)
	}
	data := []resource{}
	if p.Account {
		bound, err := s.admittedAccountOrganizations(ctx, p)
		if err != nil {
			return s.writeError(c, err)
		}
		for _, b := range bound {
			if matchesOrganizationQuery(b.organization, c.Query("q")) {
				data = append(data, organizationResource(b.principal, b.organization))
			}
		}
	} else {
		orgs, err := s.Identity.OrganizationsAsOperator(ctx, c.Query("q"))
		if err != nil {
			return s.writeError(c, err)
		}
		for _, org := range orgs {
			data = append(data, organizationResource(p, org))
		}
	}
	page, meta := pageOf(c, data)
	return writeWithIncluded(c, http.StatusOK, page, nil, meta)
}

// boundOrganization is an organization an account-wide token reaches, with
// the principal it acts as there.
type boundOrganization struct {
	organization identity.Organization
	principal    access.Principal
}

// admittedAccountOrganizations are the organizations an account-wide
// token's person is a member of that launch control admits, each with the
// membership's principal. When every one is refused, the first refusal is
// the answer (a closed gate is 503 here as for any other token), so that an
// account reads nothing launch control keeps closed.
func (s *server) admittedAccountOrganizations(ctx context.Context, p access.Principal) ([]boundOrganization, error) {
	orgs, err := s.Identity.AccountOrganizations(ctx, p)
	if err != nil {
		return nil, err
	}
	var out []boundOrganization
	var refused error
	for _, org := range orgs {
		bound, err := s.Identity.BindAccount(ctx, p, org.ID)
		if errors.Is(err, fault.ErrNotFound) {
			continue // the membership went meanwhile
		} else if err != nil {
			return nil, err
		}
		if _, err := s.Launch.RequireBy(ctx, nil, launch.Subject{OrganizationID: org.ID}, launch.AdmitAccess); err != nil {
			refused = cmp.Or(refused, err)
			continue
		}
		out = append(out, boundOrganization{organization: org, principal: bound})
	}
	if len(out) == 0 && refused != nil {
		return nil, refused
	}
	return out, nil
}

// matchesOrganizationQuery is the list's q filter: the slug or e-mail
// contains it, case-insensitively.
func matchesOrganizationQuery(org identity.Organization, q string) bool {
	q = strings.ToLower(q)
	return strings.Contains(strings.ToLower(org.Slug), q) || strings.Contains(strings.ToLower(org.Email), q)
}

// canDeleteOrganization: the operator and the organization's owners may
// delete it, as HCP Terraform's owners may.
func canDeleteOrganization(p access.Principal) bool {
	return p.Kind == access.KindOperator || (p.Kind == access.KindUser && p.Agent == nil && p.Role == access.RoleOwner)
}

// ownOrganization resolves a tenant credential's own organization.
func (s *server) ownOrganization(ctx context.Context, _ *fiber.Ctx, p access.Principal) (owner, error) {
	return s.project(ctx, p, `SELECT o.id, o.slug, '' FROM organizations o WHERE o.id = $1 AND o.id = $2`, p.OrganizationID)
}

func (s *server) listOwnOrganization(c *fiber.Ctx, p access.Principal, o owner) error {
	var orgs []identity.Organization
	if p.Require(access.PermOrganizationRead) == nil {
		org, err := s.Identity.OrganizationByID(c.UserContext(), o.OrganizationID)
		if err != nil {
			return s.writeError(c, err)
		}
		if matchesOrganizationQuery(org, c.Query("q")) {
			orgs = append(orgs, org)
		}
	}
	page, meta := pageOf(c, orgs)
	data := make([]resource, len(page))
	for i, org := range page {
		data[i] = organizationResource(p, org)
	}
	return writeWithIncluded(c, http.StatusOK, data, nil, meta)
}

// updateOrganization changes the organization's contact e-mail and default
// execution mode, the settings Cairn keeps; the name (the slug) never
// changes.
func (s *server) updateOrganization(c *fiber.Ctx, p access.Principal, o owner) error {
	var doc struct {
		Data struct {
			Type       string `json:"type"`
			Attributes struct {
				Name                       *string `json:"name"`
				Email                      *string `json:"email"`
				DefaultExecutionMode       *string `json:"default-execution-mode"`
				AllowForceDeleteWorkspaces *bool   `json:"allow-force-delete-workspaces"`
			} `json:"attributes"`
		} `json:"data"`
	}
	if err := decodeDocument(c, &doc); err != nil {
		return s.writeError(c, err)
	}
	a := doc.Data.Attributes
	if doc.Data.Type != "organizations" || (a.Name != nil && *a.Name != o.OrganizationSlug) {
		return s.writeError(c, errInvalidDocument)
	}
	ctx := c.UserContext()
	var org identity.Organization
	err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		if err := p.Require(access.PermMemberManage); err != nil {
			return err
		}
		var err error
		if org, err = s.Identity.OrganizationByID(ctx, o.OrganizationID); err != nil {
			return err
		}
		if a.Email != nil {
			if org, err = s.Identity.SetEmail(ctx, tx, p, *a.Email); err != nil {
				return err
			}
		}
		if a.DefaultExecutionMode != nil {
			if org, err = s.Identity.SetDefaultExecutionMode(ctx, tx, p, *a.DefaultExecutionMode); err != nil {
				return err
			}
		}
		if a.AllowForceDeleteWorkspaces != nil {
			org, err = s.Identity.SetAllowForceDeleteWorkspaces(ctx, tx, p, *a.AllowForceDeleteWorkspaces)
		}
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusOK, organizationResource(p, org))
}

// entitlements answers the CLI's organization check. Operations are
// advertised only once Cairn runs them; until then the CLI keeps
// execution local and uses Cairn for state.
func (s *server) entitlements(c *fiber.Ctx, p access.Principal, o owner) error {
	if err := p.Require(access.PermOrganizationRead); err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusOK, resource{
		ID: o.OrganizationSlug, Type: "entitlement-sets",
		Attributes: map[string]bool{
			"operations": true, "state-storage": true, "private-module-registry": false, "sentinel": false,
			"teams": true, "vcs-integrations": false, "agents": false, "audit-logging": true,
			"cost-estimation": false, "run-tasks": false, "sso": false, "global-run-tasks": false,
		},
	})
}

// createOrganization is for the operator, which creates an organization
// without members, and for a person's account-wide token, which creates
// one the person owns (as the identity server does). An organization-bound
// credential acts in its own organization only, so it may not.
func (s *server) createOrganization(c *fiber.Ctx) error {
	ctx := c.UserContext()
	p, err := s.authenticate(c)
	if err != nil {
		return s.writeError(c, err)
	}
	if p.Kind != access.KindOperator && !p.Account {
		return s.writeError(c, fault.ErrForbidden)
	}
	// Launch control does not gate the operator: this is how a canary
	// tenant is provisioned while the public gate is closed. A person's
	// new organization is admitted as the identity server's are.
	var doc struct {
		Data struct {
			Type       string `json:"type"`
			Attributes struct {
				Name                       string `json:"name"`
				Email                      string `json:"email"`
				DefaultExecutionMode       string `json:"default-execution-mode"`
				AllowForceDeleteWorkspaces bool   `json:"allow-force-delete-workspaces"`
			} `json:"attributes"`
		} `json:"data"`
	}
	if err := decodeDocument(c, &doc); err != nil {
		return s.writeError(c, err)
	}
	if doc.Data.Type != "organizations" {
		return s.writeError(c, errInvalidDocument)
	}
	a := doc.Data.Attributes
	in := identity.OperatorOrganization{Name: a.Name, Slug: a.Name, Email: a.Email,
		DefaultExecutionMode: a.DefaultExecutionMode, AllowForceDeleteWorkspaces: a.AllowForceDeleteWorkspaces}
	var org identity.Organization
	if p.Account {
		if org, err = s.Identity.CreateOrganizationForAccount(ctx, p, in); err == nil {
			p, err = s.Identity.BindAccount(ctx, p, org.ID)
		}
	} else {
		org, err = s.Identity.CreateOrganizationAsOperator(ctx, in)
	}
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusCreated, organizationResource(p, org))
}

// deleteOrganization deletes an organization with its workspaces, as HCP
// does, in one transaction; then the workspaces' stored objects.
func (s *server) deleteOrganization(c *fiber.Ctx, p access.Principal, o owner) error {
	if !canDeleteOrganization(p) {
		return s.writeError(c, fault.ErrForbidden)
	}
	ctx := c.UserContext()
	var keys []string
	err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		workspaces, err := s.Workspaces.SearchWorkspaces(ctx, p, workspace.Search{})
		if err != nil {
			return err
		}
		for _, w := range workspaces {
			_, objects, err := s.Workspaces.DeleteWorkspace(ctx, tx, p, w.ID)
			if err != nil {
				return err
			}
			keys = append(keys, objects...)
		}
		// Audit events outlive their organization (they are evidence):
		// who deleted it is the last of them.
		if err := audit.Record(ctx, tx, p, "organization.deleted", "organization", o.OrganizationID,
			map[string]any{"slug": o.OrganizationSlug, "workspaces": len(workspaces)}); err != nil {
			return err
		}
		return s.Identity.DeleteOrganization(ctx, tx, o.OrganizationID)
	})
	if err != nil {
		return s.writeError(c, err)
	}
	// As for one workspace: references are gone, the objects follow.
	s.State.DeleteObjects(ctx, keys)
	return c.SendStatus(http.StatusNoContent)
}

// documentLimit bounds ordinary JSON:API request documents.
const documentLimit = 65536

// decodeDocument reads a bounded JSON:API document (see decodeBody).
func decodeDocument(c *fiber.Ctx, v any) error {
	return decodeDocumentLimit(c, documentLimit, v)
}

func decodeDocumentLimit(c *fiber.Ctx, limit int64, v any) error {
	body, err := httpx.ReadBody(c, limit)
	if err != nil {
		return err
	}
	return decodeBody(body, v)
}
