package tfe

import (
	"net/http"

	"github.com/gofiber/fiber/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/identity"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/httpx"
)

func (s *server) registerOrganizations(r fiber.Router) {
	r.Post("/organizations", s.createOrganization)
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
			"email":       "",
			// A workspace the CLI creates takes this mode: remote runs
			// managed plans, as HCP Terraform does.
			"default-execution-mode": o.DefaultExecutionMode,
			"permissions": map[string]bool{
				"can-create-workspace": p.Require(access.PermWorkspaceWrite) == nil,
				"can-update":           p.Require(access.PermMemberManage) == nil,
				"can-destroy":          p.Kind == access.KindOperator,
			},
		},
		Links: map[string]string{"self": "/api/v2/organizations/" + o.Slug},
	}
}

func (s *server) readOrganization(c *fiber.Ctx, p access.Principal, o owner) error {
	if err := p.Require(access.PermOrganizationRead); err != nil {
		return s.writeError(c, err)
	}
	org, err := s.Identity.OrganizationByID(c.UserContext(), o.OrganizationID)
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusOK, organizationResource(p, org))
}

// updateOrganization changes the organization's default execution mode,
// the one setting Cairn keeps; the name (the slug) never changes.
func (s *server) updateOrganization(c *fiber.Ctx, p access.Principal, o owner) error {
	var doc struct {
		Data struct {
			Type       string `json:"type"`
			Attributes struct {
				Name                 *string `json:"name"`
				DefaultExecutionMode *string `json:"default-execution-mode"`
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
		if a.DefaultExecutionMode == nil {
			if err := p.Require(access.PermMemberManage); err != nil {
				return err
			}
			var err error
			org, err = s.Identity.OrganizationByID(ctx, o.OrganizationID)
			return err
		}
		var err error
		org, err = s.Identity.SetDefaultExecutionMode(ctx, tx, p, *a.DefaultExecutionMode)
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

// createOrganization is operator-only: organizations normally come from
// the identity server, owned by the person who creates them.
func (s *server) createOrganization(c *fiber.Ctx) error {
	ctx := c.UserContext()
	p, err := s.authenticate(c)
	if err != nil {
		return s.writeError(c, err)
	}
	if p.Kind != access.KindOperator {
		return s.writeError(c, fault.ErrForbidden)
	}
	// Only the operator gets here, and launch control does not gate the
	// operator: this is how a canary tenant is provisioned while the
	// public gate is closed.
	var doc struct {
		Data struct {
			Type       string `json:"type"`
			Attributes struct {
				Name  string `json:"name"`
				Email string `json:"email"`
			} `json:"attributes"`
		} `json:"data"`
	}
	if err := decodeDocument(c, &doc); err != nil {
		return s.writeError(c, err)
	}
	if doc.Data.Type != "organizations" {
		return s.writeError(c, errInvalidDocument)
	}
	org, err := s.Identity.CreateOrganizationAsOperator(ctx, doc.Data.Attributes.Name, doc.Data.Attributes.Name)
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusCreated, organizationResource(p, org))
}

func (s *server) deleteOrganization(c *fiber.Ctx, p access.Principal, o owner) error {
	if p.Kind != access.KindOperator {
		return s.writeError(c, fault.ErrForbidden)
	}
	if err := s.Identity.DeleteOrganizationAsOperator(c.UserContext(), o.OrganizationID); err != nil {
		return s.writeError(c, err)
	}
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
