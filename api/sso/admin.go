package sso

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
)

// Organization SSO is the owners' to change: a provider decides who can
// become a member and which teams they hold.
func requireOwner(p access.Principal) error {
	if p.Kind != access.KindUser || p.Role != access.RoleOwner {
		return fmt.Errorf("SSO settings are for owners: %w", fault.ErrForbidden)
	}
	return nil
}

// RegisterInput is a provider as an owner registers it.
type RegisterInput struct {
	Type         string
	Issuer       string
	Domains      []string
	ClientID     string
	ClientSecret string
	Scopes       []string
	MetadataXML  string
	Mapping      Mapping
	DefaultRole  string
}

// validate fills defaults and checks the input; the OIDC issuer must be
// https (plain http only on a loopback host, for local providers).
func (in RegisterInput) validate() (Provider, error) {
	bad := func(what string) error { return fmt.Errorf("%w: %s", fault.ErrValidation, what) }
	p := Provider{Type: in.Type, Issuer: strings.TrimSpace(in.Issuer)}
	domains, err := normalizeDomains(in.Domains)
	if err != nil {
		return p, err
	}
	p.Domains = domains
	role, err := access.ParseRole(cmp.Or(in.DefaultRole, string(access.RoleMember)))
	if err != nil || role == access.RoleOwner {
		return p, bad("defaultRole must be admin, writer, reader or member")
	}
	p.DefaultRole = role
	groups := "groups"
	switch in.Type {
	case TypeOIDC:
		u, err := url.Parse(p.Issuer)
		if err != nil || u.Host == "" || !(u.Scheme == "https" || u.Scheme == "http" && loopback(u.Hostname())) {
			return p, bad("issuer must be an https URL")
		}
		if in.ClientID == "" || len(in.ClientID) > 500 {
			return p, bad("oidcConfig.clientId")
		}
		if len(in.ClientSecret) < minClientSecretBytes || len(in.ClientSecret) > 1000 {
			return p, bad(fmt.Sprintf("oidcConfig.clientSecret must be at least %d bytes", minClientSecretBytes))
		}
		p.ClientID = in.ClientID
		p.Scopes = in.Scopes
		if len(p.Scopes) == 0 {
			p.Scopes = []string{"openid", "email", "profile", "groups"}
		}
		if !slices.Contains(p.Scopes, "openid") {
			p.Scopes = append([]string{"openid"}, p.Scopes...)
		}
	case TypeSAML:
		if p.Issuer == "" || len(p.Issuer) > 2000 {
			return p, bad("issuer")
		}
		if in.MetadataXML == "" || len(in.MetadataXML) > 1<<20 {
			return p, bad("samlConfig.metadataXml")
		}
		p.MetadataXML = in.MetadataXML
		groups = "MemberOf"
	default:
		return p, bad("type must be oidc or saml")
	}
	p.Mapping = Mapping{
		Groups: cmp.Or(strings.TrimSpace(in.Mapping.Groups), groups),
		Email:  cmp.Or(strings.TrimSpace(in.Mapping.Email), "email"),
		Name:   cmp.Or(strings.TrimSpace(in.Mapping.Name), "name"),
	}
	for _, v := range []string{p.Mapping.Groups, p.Mapping.Email, p.Mapping.Name} {
		if len(v) > 200 {
			return p, bad("mapping")
		}
	}
	return p, nil
}

func loopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}

// Register adds an identity provider to the principal's organization.
// Its domains must not be served by any other provider of the instance.
func (s *Service) Register(ctx context.Context, p access.Principal, in RegisterInput) (Provider, error) {
	if err := requireOwner(p); err != nil {
		return Provider{}, err
	}
	prov, err := in.validate()
	if err != nil {
		return Provider{}, err
	}
	if prov.Type == TypeSAML {
		if s.SAML == nil {
			return Provider{}, ErrSAMLUnavailable
		}
		if err := s.SAML.ValidateMetadata(prov.MetadataXML); err != nil {
			return Provider{}, err
		}
	}
	prov.ID = id.New("ssop")
	prov.OrganizationID = p.OrganizationID
	prov.CreatedBy = p.ID
	prov.CreatedAt = s.stamp()
	var sealed []byte
	if prov.Type == TypeOIDC {
		if s.opts.Sealer == nil {
			return Provider{}, ErrSealUnavailable
		}
		if sealed, err = s.opts.Sealer.Seal([]byte(in.ClientSecret), []byte("sso-client-secret:"+prov.ID)); err != nil {
			return Provider{}, fmt.Errorf("sealing the client secret: %w", err)
		}
	}
	err = db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		if err := insertProvider(ctx, tx, prov, sealed); err != nil {
			return err
		}
		return audit.Record(ctx, tx, p, "sso.provider_registered", "sso_provider", prov.ID, map[string]any{
			"type": prov.Type, "issuer": prov.Issuer, "domains": prov.Domains, "default_role": string(prov.DefaultRole)})
	})
	return prov, err
}

// Providers lists the organization's providers and whether it requires SSO.
func (s *Service) Providers(ctx context.Context, p access.Principal) ([]Provider, bool, error) {
	if err := requireOwner(p); err != nil {
		return nil, false, err
	}
	providers, err := providersOf(ctx, s.db, p.OrganizationID)
	if err != nil {
		return nil, false, err
	}
	required, err := ssoRequired(ctx, s.db, p.OrganizationID)
	return providers, required, err
}

// Delete removes a provider with its domains; its members keep their
// accounts and memberships.
func (s *Service) Delete(ctx context.Context, p access.Principal, providerID string) error {
	if err := requireOwner(p); err != nil {
		return err
	}
	return db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		if err := deleteProvider(ctx, tx, p.OrganizationID, providerID); err != nil {
			return err
		}
		return audit.Record(ctx, tx, p, "sso.provider_deleted", "sso_provider", providerID, nil)
	})
}

// Require turns the organization's SSO requirement on or off. With it on,
// non-owner members cannot sign in with a password.
func (s *Service) Require(ctx context.Context, p access.Principal, required bool) (bool, error) {
	if err := requireOwner(p); err != nil {
		return false, err
	}
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		if err := setSSORequired(ctx, tx, p.OrganizationID, required); err != nil {
			return err
		}
		return audit.Record(ctx, tx, p, "sso.required_changed", "organization", p.OrganizationID,
			map[string]any{"required": required})
	})
	return required, err
}

// TestResult reads a dry run's result in the principal's organization.
func (s *Service) TestResult(ctx context.Context, p access.Principal, testID string) (TestResult, error) {
	if err := requireOwner(p); err != nil {
		return TestResult{}, err
	}
	return testResult(ctx, s.db, p.OrganizationID, testID, s.stamp())
}
