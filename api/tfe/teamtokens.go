package tfe

import (
	"context"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/team"
)

// Team API tokens are HCP Terraform's legacy single team token: one per
// team, replaced by the next one created, its plaintext shown once.

func (s *server) registerTeamTokens(r fiber.Router) {
	r.Post("/teams/:id/authentication-token", s.guard(s.byTeam, s.createTeamToken))
	r.Get("/teams/:id/authentication-token", s.guard(s.byTeam, s.readTeamToken))
	r.Delete("/teams/:id/authentication-token", s.guardStop(s.byTeam, s.deleteTeamToken))
	r.Get("/organizations/:org/team-tokens", s.guard(s.byOrganization, s.listTeamTokens))
	r.Get("/authentication-tokens/:id", s.guard(s.byTeamToken, s.readTeamTokenByID))
	r.Delete("/authentication-tokens/:id", s.guardStop(s.byTeamToken, s.deleteTeamTokenByID))
}

func (s *server) byTeamToken(ctx context.Context, c *fiber.Ctx, p access.Principal) (owner, error) {
	return s.project(ctx, p, `
		SELECT o.id, o.slug, '' FROM team_tokens k JOIN organizations o ON o.id = k.organization_id
		WHERE k.id = $1 AND ($2 = '' OR o.id = $2)`, c.Params("id"))
}

// creatorRef names who created a token as HCP's created-by choice: a user,
// a team (a team token), or the organization (the operator or a service
// account, which act for it).
func creatorRef(o owner, t team.Token) relationship {
	switch t.CreatedByKind {
	case access.KindUser:
		return toOne(t.CreatedBy, "users")
	case access.KindTeam:
		return toOne(t.CreatedBy, "teams")
	}
	return toOne(o.OrganizationSlug, "organizations")
}

// teamTokenResource renders a token; plaintext is set only in the create
// response.
func teamTokenResource(o owner, t team.Token, plaintext string) resource {
	var token any
	if plaintext != "" {
		token = plaintext
	}
	var lastUsed any
	if t.LastUsedAt != nil {
		lastUsed = timestamp(*t.LastUsedAt)
	}
	return resource{
		ID: t.ID, Type: "authentication-tokens",
		Attributes: map[string]any{
			"created-at": timestamp(t.CreatedAt), "expired-at": timestamp(t.ExpiresAt), "last-used-at": lastUsed,
			"description": nil, "token": token,
		},
		Relationships: map[string]relationship{"team": toOne(t.TeamID, "teams"), "created-by": creatorRef(o, t)},
	}
}

func (s *server) createTeamToken(c *fiber.Ctx, p access.Principal, o owner) error {
	// The body is optional: {"data":{"type":"authentication-tokens","attributes":{"expired-at":…}}}.
	var doc struct {
		Data struct {
			Attributes struct {
				ExpiredAt *time.Time `json:"expired-at"`
			} `json:"attributes"`
		} `json:"data"`
	}
	if c.Request().Header.ContentLength() != 0 {
		if err := decodeDocument(c, &doc); err != nil {
			return s.writeError(c, err)
		}
	}
	ctx := c.UserContext()
	var tok team.Token
	var plaintext string
	err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var err error
		tok, plaintext, err = s.TeamTokens.Create(ctx, tx, p, c.Params("id"), doc.Data.Attributes.ExpiredAt)
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return writeData(c, http.StatusCreated, teamTokenResource(o, tok, plaintext))
}

func (s *server) readTeamToken(c *fiber.Ctx, p access.Principal, o owner) error {
	tok, err := s.TeamTokens.Get(c.UserContext(), p, c.Params("id"))
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusOK, teamTokenResource(o, tok, ""))
}

func (s *server) deleteTeamToken(c *fiber.Ctx, p access.Principal, _ owner) error {
	return s.revokeTeamToken(c, p, c.Params("id"))
}

func (s *server) revokeTeamToken(c *fiber.Ctx, p access.Principal, teamID string) error {
	ctx := c.UserContext()
	err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		_, err := s.TeamTokens.Revoke(ctx, tx, p, teamID)
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	return c.SendStatus(http.StatusNoContent)
}

func (s *server) readTeamTokenByID(c *fiber.Ctx, p access.Principal, o owner) error {
	ctx := c.UserContext()
	teamID, err := s.TeamTokens.TeamOf(ctx, p, c.Params("id"))
	if err != nil {
		return s.writeError(c, err)
	}
	tok, err := s.TeamTokens.Get(ctx, p, teamID)
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusOK, teamTokenResource(o, tok, ""))
}

func (s *server) deleteTeamTokenByID(c *fiber.Ctx, p access.Principal, _ owner) error {
	teamID, err := s.TeamTokens.TeamOf(c.UserContext(), p, c.Params("id"))
	if err != nil {
		return s.writeError(c, err)
	}
	return s.revokeTeamToken(c, p, teamID)
}

func (s *server) listTeamTokens(c *fiber.Ctx, p access.Principal, o owner) error {
	tokens, err := s.TeamTokens.List(c.UserContext(), p, c.Query("q"), c.Query("sort"))
	if err != nil {
		return s.writeError(c, err)
	}
	page, meta := pageOf(c, tokens)
	data := make([]resource, 0, len(page))
	for _, tok := range page {
		data = append(data, teamTokenResource(o, tok, ""))
	}
	return writeWithIncluded(c, http.StatusOK, data, nil, meta)
}
