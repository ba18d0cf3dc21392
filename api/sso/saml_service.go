package sso

import (
	"context"
	"errors"
	"net/url"
	"strings"

	"github.com/crewjam/saml"
)

// SAMLProvider is the service-provider side of organization SSO: it
// starts SAML sign-ins for the Service (SAMLStarter), serves each
// provider's SP metadata and consumes the IdP's responses.
type SAMLProvider struct {
	sso *Service
}

var _ SAMLStarter = (*SAMLProvider)(nil)

// EnableSAML lets s serve SAML providers.
func EnableSAML(s *Service) *SAMLProvider {
	p := &SAMLProvider{sso: s}
	s.SAML = p
	return p
}

// ValidateMetadata checks IdP metadata as an owner registers it.
func (p *SAMLProvider) ValidateMetadata(metadataXML string) error {
	_, err := ParseSAMLMetadata(metadataXML, "")
	return err
}

// AuthnRequest returns the IdP's SSO URL with a fresh AuthnRequest and
// relayState (the flow's state), and the request's ID for the flow.
func (p *SAMLProvider) AuthnRequest(ctx context.Context, prov Provider, relayState string) (string, string, error) {
	sp, err := p.serviceProvider(ctx, prov)
	if err != nil {
		return "", "", err
	}
	return samlAuthnRedirect(sp, relayState)
}

// serviceProvider builds a provider's SP for one request: its replay
// ledger runs on the request's context.
func (p *SAMLProvider) serviceProvider(ctx context.Context, prov Provider) (*saml.ServiceProvider, error) {
	if prov.Type != TypeSAML {
		return nil, ErrUnknownProvider
	}
	keys, err := loadSPKeyPair(ctx, p.sso.db, p.sso.opts.Sealer, prov.ID)
	if err != nil {
		return nil, err
	}
	ledger := &assertionLedger{ctx: ctx, q: p.sso.db, providerID: prov.ID, now: p.sso.now}
	return newServiceProvider(prov, p.sso.SPMetadataURL(prov.ID), p.sso.ACSURL(prov.ID), keys, ledger)
}

// Metadata is a SAML provider's SP metadata XML, which the IdP's admin
// loads; an unknown provider, or an OIDC one, is ErrUnknownProvider.
func (p *SAMLProvider) Metadata(ctx context.Context, providerID string) ([]byte, error) {
	row, err := providerByID(ctx, p.sso.db, providerID)
	if err != nil {
		return nil, err
	}
	sp, err := p.serviceProvider(ctx, row.provider())
	if err != nil {
		return nil, err
	}
	return spMetadataXML(sp)
}

// ACSResult is where the assertion consumer service sends the browser: the
// flow's callbackURL with the sign-in code or the dry run's result, or,
// for an unsolicited response, the dashboard, which starts a fresh one.
type ACSResult struct {
	Location    string
	Unsolicited bool
}

// Consume handles a response the IdP posted to a provider's ACS.
// Only an answer to a flow this SP started signs anyone in: a response
// without RelayState, with one no flow issued, or without InResponseTo is
// unsolicited (IdP-initiated) and leads to a fresh SP-initiated flow
// instead. Everything else is checked against the flow's AuthnRequest ID
// and refused with ErrSAMLResponseInvalid unless it verifies.
func (p *SAMLProvider) Consume(ctx context.Context, providerID, samlResponse, relayState string) (ACSResult, error) {
	row, err := providerByID(ctx, p.sso.db, providerID)
	if err != nil {
		return ACSResult{}, err
	}
	prov := row.provider()
	if prov.Type != TypeSAML {
		return ACSResult{}, ErrUnknownProvider
	}
	raw, err := decodeSAMLResponse(samlResponse)
	if err != nil {
		return ACSResult{}, err
	}
	if relayState == "" || samlInResponseTo(raw) == "" {
		return p.restart(row), nil
	}
	f, err := p.sso.ConsumeFlow(ctx, relayState)
	if errors.Is(err, ErrStateInvalid) {
		return p.restart(row), nil
	}
	if err != nil {
		return ACSResult{}, err
	}
	if f.Provider != prov.ID || f.SAMLRequestID == nil {
		return ACSResult{}, ErrStateInvalid
	}
	ident, err := p.verify(ctx, prov, raw, *f.SAMLRequestID)
	var finish Finish
	if err != nil {
		finish, err = p.sso.FailFlow(ctx, f, err)
	} else {
		finish, err = p.sso.CompleteSignIn(ctx, f, ident)
	}
	if err != nil {
		return ACSResult{}, err
	}
	return ACSResult{Location: finish.Redirect("")}, nil
}

// verify checks a response against the flow's request and reads the
// person from it.
func (p *SAMLProvider) verify(ctx context.Context, prov Provider, raw []byte, requestID string) (Identity, error) {
	sp, err := p.serviceProvider(ctx, prov)
	if err != nil {
		return Identity{}, err
	}
	assertion, err := verifySAMLResponse(sp, raw, requestID)
	if err != nil {
		return Identity{}, err
	}
	id, err := samlIdentityOf(assertion, prov.Mapping.Groups, prov.Mapping.Name)
	if err != nil {
		return Identity{}, err
	}
	// The NameID is the address the IdP vouches for; CompleteSignIn
	// accepts it only within the provider's registered domains.
	return Identity{ProviderID: prov.ID, Subject: id.Email, Email: id.Email, EmailVerified: true, Name: id.Name,
		Groups: id.Groups, GroupsAsserted: id.GroupsAsserted}, nil
}

// restart answers an unsolicited (IdP-initiated) response without
// reading whom it names: it sends the browser to the dashboard, which
// starts a fresh SP-initiated sign-in through the same provider bound to
// that browser. The IdP's own session usually makes that round trip
// invisible, so a tile in the IdP's portal still signs the person in, but
// only through a response to a request Cairn made.
func (p *SAMLProvider) restart(row providerRow) ACSResult {
	start := strings.TrimRight(p.sso.opts.DashboardURL, "/") + "/sign-in/sso?" + url.Values{"providerId": {row.ID}}.Encode()
	return ACSResult{Location: start, Unsolicited: true}
}

// SAMLProvider returns s's SAML service provider; ErrSAMLUnavailable when
// SAML is not enabled.
func (s *Service) SAMLProvider() (*SAMLProvider, error) {
	p, ok := s.SAML.(*SAMLProvider)
	if !ok || p == nil {
		return nil, ErrSAMLUnavailable
	}
	return p, nil
}
