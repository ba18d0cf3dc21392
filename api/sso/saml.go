package sso

import (
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"strings"
	"time"

	"github.com/beevik/etree"
	"github.com/crewjam/saml"
	"github.com/crewjam/saml/samlsp"
)

// The SAML side of organization SSO. Cairn is a service provider (SP)
// per SAML provider, built from the IdP metadata the owner registered:
// SP-initiated only, HTTP-Redirect binding for the AuthnRequest and
// HTTP-POST for the response. crewjam/saml v0.6.3 verifies the response;
// the protections it leaves off unless asked are turned on here (SHA-1
// refused, replay ledger, no IdP-initiated responses).

var (
	// ErrSAMLResponseInvalid is a SAML response the ACS refused: unsigned,
	// signed by another key or with SHA-1, expired, for another audience or
	// another request, replayed, or with a NameID that is not an address.
	ErrSAMLResponseInvalid = errors.New("SAML response refused")
	// ErrSAMLMetadataInvalid is IdP metadata an SP cannot be built from.
	ErrSAMLMetadataInvalid = errors.New("SAML IdP metadata invalid")
)

// DefaultSAMLGroupsAttribute is the attribute that carries a person's
// groups unless the provider's mapping names another (HCP's default).
const DefaultSAMLGroupsAttribute = "MemberOf"

// samlNameAttributes are read, in order, for the person's display name
// when the provider's mapping names none that the assertion carries.
var samlNameAttributes = []string{"displayName", "urn:oid:2.16.840.1.113730.3.1.241", "cn", "urn:oid:2.5.4.3", "name"}

// ParseSAMLMetadata checks IdP metadata as an owner registers it: one IdP
// entity (the one named entityID when given), an SSO endpoint with the
// HTTP-Redirect binding, and a signing certificate, since every response
// must be signed with it.
func ParseSAMLMetadata(metadataXML, entityID string) (*saml.EntityDescriptor, error) {
	var (
		entity *saml.EntityDescriptor
		err    error
	)
	if entityID != "" {
		entity, err = samlsp.ParseMetadataByEntityID([]byte(metadataXML), entityID)
	} else {
		entity, err = samlsp.ParseMetadata([]byte(metadataXML))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: IdP metadata does not parse (%v)", ErrSAMLMetadataInvalid, err)
	}
	if len(entity.IDPSSODescriptors) == 0 {
		return nil, fmt.Errorf("%w: no IDPSSODescriptor", ErrSAMLMetadataInvalid)
	}
	sp := saml.ServiceProvider{IDPMetadata: entity}
	if sp.GetSSOBindingLocation(saml.HTTPRedirectBinding) == "" {
		return nil, fmt.Errorf("%w: no SingleSignOnService with the HTTP-Redirect binding", ErrSAMLMetadataInvalid)
	}
	if !hasSigningCertificate(entity) {
		return nil, fmt.Errorf("%w: no signing certificate", ErrSAMLMetadataInvalid)
	}
	return entity, nil
}

func hasSigningCertificate(entity *saml.EntityDescriptor) bool {
	for _, d := range entity.IDPSSODescriptors {
		for _, k := range d.KeyDescriptors {
			if (k.Use == "" || k.Use == "signing") && len(k.KeyInfo.X509Data.X509Certificates) > 0 {
				return true
			}
		}
	}
	return false
}

// newServiceProvider builds the provider's SP. ledger records accepted
// assertion IDs.
func newServiceProvider(p Provider, metadataURLText, acsURLText string, keys spKeyPair, ledger saml.AssertionReplayCache) (*saml.ServiceProvider, error) {
	idp, err := ParseSAMLMetadata(p.MetadataXML, p.Issuer)
	if err != nil {
		return nil, err
	}
	metadataURL, err := url.Parse(metadataURLText)
	if err != nil {
		return nil, fmt.Errorf("building SP metadata URL: %w", err)
	}
	acsURL, err := url.Parse(acsURLText)
	if err != nil {
		return nil, fmt.Errorf("building SP ACS URL: %w", err)
	}
	return &saml.ServiceProvider{
		EntityID:          metadataURL.String(),
		Key:               keys.key,
		Certificate:       keys.certificate,
		MetadataURL:       *metadataURL,
		AcsURL:            *acsURL,
		IDPMetadata:       idp,
		AuthnNameIDFormat: saml.EmailAddressNameIDFormat,
		// AuthnRequests go unsigned: they carry nothing secret (the
		// response is bound to its request by InResponseTo and to the
		// browser by the flow), and IdPs that re-post a redirect request
		// from their login form (samlidp does) lose its query signature.
		// The key decrypts assertions an IdP encrypts to the SP.
		// Only HTTP-POST: no artifact resolution, so the ACS never calls
		// out to an address a response names.
		AssertionConsumerServiceBindings: []string{saml.HTTPPostBinding},
		MetadataValidDuration:            7 * 24 * time.Hour,
		// The protections crewjam/saml leaves off unless set.
		RejectSHA1Signatures:    true,
		AllowIDPInitiated:       false,
		ReplayCache:             ledger,
		RejectUnknownConditions: true,
	}, nil
}

// samlAuthnRedirect is the IdP URL that carries a fresh AuthnRequest
// (HTTP-Redirect binding) and relayState, with the request's ID
// for the flow to record.
func samlAuthnRedirect(sp *saml.ServiceProvider, relayState string) (string, string, error) {
	req, err := sp.MakeAuthenticationRequest(sp.GetSSOBindingLocation(saml.HTTPRedirectBinding), saml.HTTPRedirectBinding, saml.HTTPPostBinding)
	if err != nil {
		return "", "", fmt.Errorf("making SAML AuthnRequest: %w", err)
	}
	u, err := req.Redirect(relayState, sp)
	if err != nil {
		return "", "", fmt.Errorf("encoding SAML AuthnRequest: %w", err)
	}
	return u.String(), req.ID, nil
}

// maxSAMLResponse bounds the decoded response an ACS reads.
const maxSAMLResponse = 256 << 10

// decodeSAMLResponse decodes the SAMLResponse form value and refuses what
// no honest IdP sends: a document too large, or one with XML comments. A
// comment inside a signed value does not change its signature (exclusive
// canonicalization drops comments), which is how `alice@example.com<!---->
// .evil.com` passes for another address at SPs that read the first text
// node; crewjam reads the canonical text, and Cairn refuses the document.
func decodeSAMLResponse(form string) ([]byte, error) {
	if len(form) > maxSAMLResponse*4/3+4 {
		return nil, fmt.Errorf("%w: response too large", ErrSAMLResponseInvalid)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(form))
	if err != nil || len(raw) == 0 {
		return nil, fmt.Errorf("%w: SAMLResponse is not base64", ErrSAMLResponseInvalid)
	}
	doc := etree.NewDocument()
	if err := doc.ReadFromBytes(raw); err != nil || doc.Root() == nil {
		return nil, fmt.Errorf("%w: SAMLResponse is not XML", ErrSAMLResponseInvalid)
	}
	if hasComment(doc.Root()) {
		return nil, fmt.Errorf("%w: SAMLResponse contains an XML comment", ErrSAMLResponseInvalid)
	}
	return raw, nil
}

func hasComment(el *etree.Element) bool {
	for _, tok := range el.Child {
		switch t := tok.(type) {
		case *etree.Comment:
			return true
		case *etree.Element:
			if hasComment(t) {
				return true
			}
		}
	}
	return false
}

// samlInResponseTo reads the InResponseTo of an unverified response, only
// to tell an unsolicited response (none) from an answer to a flow; the
// verification checks it again against the flow's request ID.
func samlInResponseTo(raw []byte) string {
	doc := etree.NewDocument()
	if err := doc.ReadFromBytes(raw); err != nil || doc.Root() == nil {
		return ""
	}
	return doc.Root().SelectAttrValue("InResponseTo", "")
}

// verifySAMLResponse checks raw against the flow's AuthnRequest ID and
// returns its assertion. Every refusal wraps ErrSAMLResponseInvalid; the
// library's detail (which check failed) is kept for the log only.
func verifySAMLResponse(sp *saml.ServiceProvider, raw []byte, requestID string) (*saml.Assertion, error) {
	assertion, err := sp.ParseXMLResponse(raw, []string{requestID}, sp.AcsURL)
	if err != nil {
		var invalid *saml.InvalidResponseError
		if errors.As(err, &invalid) && invalid.PrivateErr != nil {
			err = invalid.PrivateErr
		}
		return nil, samlRefusal{cause: err}
	}
	return assertion, nil
}

// samlRefusal is a response the SP refused: ErrSAMLResponseInvalid to the
// problem table, the library's reason to the log.
type samlRefusal struct{ cause error }

func (r samlRefusal) Error() string { return "SAML response refused: " + r.cause.Error() }

func (r samlRefusal) Is(target error) bool { return target == ErrSAMLResponseInvalid }

func (r samlRefusal) Unwrap() error { return r.cause }

// samlIdentity is what a verified assertion says about the person.
type samlIdentity struct {
	Email          string
	Name           string
	Groups         []string
	GroupsAsserted bool
}

// samlIdentityOf reads the person from a verified assertion: the NameID in
// the emailAddress format (an address, nothing else), the display name
// and the groups from the configured attributes.
func samlIdentityOf(a *saml.Assertion, groupsAttribute, nameAttribute string) (samlIdentity, error) {
	if a.Subject == nil || a.Subject.NameID == nil {
		return samlIdentity{}, fmt.Errorf("%w: the assertion has no NameID", ErrSAMLResponseInvalid)
	}
	nameID := a.Subject.NameID
	if nameID.Format != string(saml.EmailAddressNameIDFormat) {
		return samlIdentity{}, fmt.Errorf("%w: the NameID format must be %s", ErrSAMLResponseInvalid, saml.EmailAddressNameIDFormat)
	}
	email, err := plainAddress(nameID.Value)
	if err != nil {
		return samlIdentity{}, err
	}
	if groupsAttribute == "" {
		groupsAttribute = DefaultSAMLGroupsAttribute
	}
	groups, asserted := samlAttribute(a, groupsAttribute)
	id := samlIdentity{Email: email, Groups: SplitGroups(groups), GroupsAsserted: asserted}
	for _, name := range append([]string{nameAttribute}, samlNameAttributes...) {
		if name == "" {
			continue
		}
		if values, ok := samlAttribute(a, name); ok && len(values) > 0 && strings.TrimSpace(values[0]) != "" {
			id.Name = strings.TrimSpace(values[0])
			break
		}
	}
	return id, nil
}

// plainAddress accepts exactly one bare e-mail address.
func plainAddress(v string) (string, error) {
	v = strings.TrimSpace(v)
	addr, err := mail.ParseAddress(v)
	if err != nil || addr.Address != v || addr.Name != "" || strings.Count(v, "@") != 1 {
		return "", fmt.Errorf("%w: the NameID is not an e-mail address", ErrSAMLResponseInvalid)
	}
	return strings.ToLower(v), nil
}

// samlAttribute returns the values of the attribute whose Name is name,
// else of the one whose FriendlyName is (samlidp and some IdPs name
// attributes by OID and give the familiar name as FriendlyName), and
// whether the assertion carries it at all.
func samlAttribute(a *saml.Assertion, name string) ([]string, bool) {
	var byFriendly []string
	found, foundFriendly := false, false
	var values []string
	for _, st := range a.AttributeStatements {
		for _, attr := range st.Attributes {
			switch {
			case attr.Name == name:
				found = true
				for _, v := range attr.Values {
					values = append(values, v.Value)
				}
			case attr.FriendlyName == name:
				foundFriendly = true
				for _, v := range attr.Values {
					byFriendly = append(byFriendly, v.Value)
				}
			}
		}
	}
	if found {
		return values, true
	}
	return byFriendly, foundFriendly
}

// spMetadataXML is the SP's metadata document, as the IdP's admin needs it.
func spMetadataXML(sp *saml.ServiceProvider) ([]byte, error) {
	out, err := xml.MarshalIndent(sp.Metadata(), "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding SP metadata: %w", err)
	}
	return out, nil
}
