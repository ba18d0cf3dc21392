package assembly

import (
	"log/slog"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/assembly/domain"
	"github.com/cairnhq/cairn/api/oauth"
	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/platform/seal"
	"github.com/cairnhq/cairn/api/platform/secret"
	"github.com/cairnhq/cairn/api/platform/signingkey"
	"github.com/cairnhq/cairn/api/scim"
	"github.com/cairnhq/cairn/api/sso"
)

// Deps is what cairn-api serves: the domain services and the sign-in
// surfaces beside them. The embedded domain.Deps's fields (Config, DB,
// Services, Blobs, ...) read as Deps's own.
type Deps struct {
	domain.Deps
	// OAuth is the authorization server for agents (nil with Identity).
	OAuth *oauth.Service
	// SCIM is organizations' provisioning (nil with Identity).
	SCIM *scim.Service
	// SSO is federated sign-in and organization SSO (nil with Identity).
	SSO *sso.Service
}

// Assemble wires the domain services and the sign-in surfaces from
// configuration. Without a database or AUTH_SECRET they stay nil, and the
// surfaces that need them fail closed.
func Assemble(cfg config.Config, conn *sqlx.DB, logger *slog.Logger) (Deps, error) {
	core, err := domain.Assemble(cfg, conn, logger)
	if err != nil {
		return Deps{}, err
	}
	deps := Deps{Deps: core}
	if core.Identity == nil {
		return deps, nil
	}
	agentOpts := OAuthOptions(cfg)
	agentOpts.UserTokens = core.Identity
	if core.Sealer != nil {
		// ID tokens are signed with keys of their own, sealed like the
		// workload-identity issuer's and never used for its tokens.
		agentOpts.IDTokenKeys = signingkey.New(conn, core.Sealer, signingkey.IDToken)
	}
	if deps.OAuth, err = oauth.NewService(conn, agentOpts); err != nil {
		return Deps{}, err
	}
	deps.SSO = sso.NewService(conn, core.Identity, SSOOptions(cfg, core.Sealer))
	sso.EnableSAML(deps.SSO)
	deps.SCIM = scim.NewService(conn, core.Services.Teams, logger, scim.Options{
		TokenKey: secret.Derive(cfg.AuthSecret, "scim-token"),
		BaseURL:  cfg.Issuer() + "/api/auth/scim/v2",
	})
	return deps, nil
}

// OAuthOptions derives the authorization server's settings and keys.
func OAuthOptions(cfg config.Config) oauth.Options {
	return oauth.Options{
		Issuer:         cfg.Issuer(),
		Resource:       cfg.AgentResource(),
		ConsentURL:     strings.TrimRight(cfg.DashboardURL, "/") + "/oauth/consent",
		SigningSeed:    secret.Derive(cfg.AuthSecret, "oauth-access-token-signing"),
		TokenKey:       secret.Derive(cfg.AuthSecret, "oauth-token"),
		RequestKey:     secret.Derive(cfg.AuthSecret, "oauth-authorization-request"),
		AccessTokenTTL: cfg.OAuthAccessTokenTTL,
		Metadata:       oauth.NewMetadataFetcher(),
	}
}

// SSOOptions derives the federated sign-in's settings and keys.
func SSOOptions(cfg config.Config, sealer *seal.Sealer) sso.Options {
	return sso.Options{
		PublicURL:    cfg.PublicURL,
		DashboardURL: cfg.DashboardURL,
		FlowKey:      secret.Derive(cfg.AuthSecret, "sign-in-flow"),
		Sealer:       sealer,
		IdP: sso.InstanceIdP{Name: cfg.IdPName, ClientID: cfg.IdPClientID,
			ClientSecret: cfg.IdPClientSecret.Reveal(), Issuer: cfg.IdPIssuer},
	}
}
