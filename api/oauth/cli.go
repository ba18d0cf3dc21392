package oauth

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
)

// The OpenTofu/Terraform CLI's `tofu login` is a public client built into
// Cairn (its row comes with the migrations), named in the login.v1
// service discovery. The CLI listens on a free loopback port of CLIPorts
// and sends http://localhost:<port>/login as its redirect URI, so this
// client's redirect URI matches on that port range rather than on a
// registered list. Its code is exchanged for a user API token, the
// long-lived credential the CLI keeps (it drops anything else the token
// endpoint answers).
const (
	CLIClientID = "terraform-cli"
	// ScopeCLI is the built-in client's only scope: a user API token for
	// the remote-backend API and the module registry.
	ScopeCLI = "tfe:api"
)

// CLIPorts is the inclusive range of loopback ports the CLI may listen
// on, as login.v1 advertises it.
var CLIPorts = [2]int{10000, 10010}

// CLIRedirectMatches reports whether a redirect URI is one the CLI sends:
// exactly http://localhost:<port>/login with port in CLIPorts. Another
// host (127.0.0.1 included), path, query, user or fragment is refused.
func CLIRedirectMatches(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil || port < CLIPorts[0] || port > CLIPorts[1] {
		return false
	}
	return raw == fmt.Sprintf("http://localhost:%d/login", port)
}

// cliResource is the audience recorded on the CLI's grants: the
// remote-backend API its token is for.
func (s *Service) cliResource() string { return s.opts.Issuer + "/api/v2/" }

// issueUserToken answers the CLI's code exchange: a new user API token of
// the person in the organization chosen at consent, created (and audited)
// in the transaction that consumes the code. No refresh token: the CLI
// keeps only the access token, and a user token does not expire unless
// revoked.
func (s *Service) issueUserToken(ctx context.Context, tx *sqlx.Tx, g Grant, now time.Time) (TokenResponse, error) {
	if s.opts.UserTokens == nil {
		return TokenResponse{}, describe(ErrUnauthorizedClient, "user tokens are not available")
	}
	person := access.Principal{Kind: access.KindUser, ID: g.UserID, OrganizationID: g.OrganizationID}
	_, token, err := s.opts.UserTokens.CreateUserToken(ctx, tx, person, "tofu login "+now.UTC().Format("2006-01-02 15:04 UTC"), nil, false)
	if err != nil {
		return TokenResponse{}, fmt.Errorf("issuing the CLI's user token: %w", err)
	}
	return TokenResponse{AccessToken: token, TokenType: "bearer", Scope: joinScopes(g.Scopes)}, touchGrant(ctx, tx, g.ID, now, now)
}
