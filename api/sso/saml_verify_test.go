package sso

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crewjam/saml"

	"github.com/cairnhq/cairn/api/sso/samltest"
)

// memoryLedger is a replay cache for the tests that exercise the SP
// without a database; saml_test.go checks the PostgreSQL one.
type memoryLedger struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (m *memoryLedger) Consume(id string, _ time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen[id] {
		return saml.ErrAssertionReplayed
	}
	m.seen[id] = true
	return nil
}

type verifyFixture struct {
	idp   *samltest.IdP
	sp    *saml.ServiceProvider
	alice samltest.User
}

const testPublicURL = "https://cairn.test"

// newVerifyFixture runs an IdP that trusts a fresh SP; encrypted says
// whether the IdP has the SP's encryption key (forgeries need clear text).
func newVerifyFixture(t *testing.T, encrypted bool) *verifyFixture {
	t.Helper()
	idp := samltest.Start(t)
	keys, err := newSPKeyPair("ssop_test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	p := Provider{ID: "ssop_test", Type: TypeSAML, Issuer: idp.EntityID(), MetadataXML: idp.Metadata()}
	svc := NewService(nil, nil, Options{PublicURL: testPublicURL})
	sp, err := newServiceProvider(p, svc.SPMetadataURL(p.ID), svc.ACSURL(p.ID), keys, &memoryLedger{seen: map[string]bool{}})
	if err != nil {
		t.Fatal(err)
	}
	md, err := spMetadataXML(sp)
	if err != nil {
		t.Fatal(err)
	}
	if !encrypted {
		md = []byte(samltest.WithoutEncryption(t, string(md)))
	}
	idp.TrustSP("cairn", string(md))
	alice := samltest.User{Name: "alice", Password: "correct horse", Email: "alice@example.com", CommonName: "Alice Example",
		Groups: []string{"platform", "ops,dev"}}
	idp.AddUser(alice)
	return &verifyFixture{idp: idp, sp: sp, alice: alice}
}

// signIn starts an SP-initiated sign-in and returns the IdP's answer and
// the AuthnRequest ID the flow would record.
func (f *verifyFixture) signIn(t *testing.T, user samltest.User) (samltest.Posted, string) {
	t.Helper()
	redirect, requestID, err := samlAuthnRedirect(f.sp, "state-1")
	if err != nil {
		t.Fatal(err)
	}
	posted := f.idp.SignIn(redirect, user)
	if posted.RelayState != "state-1" {
		t.Fatalf("RelayState = %q", posted.RelayState)
	}
	return posted, requestID
}

func (f *verifyFixture) verify(t *testing.T, samlResponse, requestID string) (samlIdentity, error) {
	t.Helper()
	raw, err := decodeSAMLResponse(samlResponse)
	if err != nil {
		return samlIdentity{}, err
	}
	a, err := verifySAMLResponse(f.sp, raw, requestID)
	if err != nil {
		return samlIdentity{}, err
	}
	return samlIdentityOf(a, "eduPersonAffiliation", "")
}

func TestSAMLVerifiesSamlidpResponse(t *testing.T) {
	t.Parallel()
	f := newVerifyFixture(t, true)
	posted, requestID := f.signIn(t, f.alice)
	if samltest.Decode(t, posted.SAMLResponse).Root().FindElement("./EncryptedAssertion") == nil {
		t.Fatal("the IdP did not encrypt the assertion to the SP's key")
	}
	if want := testPublicURL + "/api/auth/sso/saml2/sp/acs/ssop_test"; posted.Action != want {
		t.Errorf("the IdP posts to %q, want %q", posted.Action, want)
	}
	id, err := f.verify(t, posted.SAMLResponse, requestID)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if id.Email != "alice@example.com" || id.Name != "Alice Example" || !id.GroupsAsserted ||
		strings.Join(id.Groups, "|") != "platform|ops|dev" {
		t.Fatalf("identity = %+v", id)
	}
}

func TestSAMLUnsolicitedResponseHasNoInResponseTo(t *testing.T) {
	t.Parallel()
	f := newVerifyFixture(t, false)
	posted := f.idp.Unsolicited(f.sp.EntityID, f.alice)
	raw, err := decodeSAMLResponse(posted.SAMLResponse)
	if err != nil {
		t.Fatal(err)
	}
	if got := samlInResponseTo(raw); got != "" {
		t.Fatalf("InResponseTo = %q", got)
	}
	if _, err := verifySAMLResponse(f.sp, raw, "id-any"); !errors.Is(err, ErrSAMLResponseInvalid) {
		t.Fatalf("unsolicited response: %v", err)
	}
}

func TestSAMLIdentityOfAssertion(t *testing.T) {
	t.Parallel()
	email := string(saml.EmailAddressNameIDFormat)
	assertion := func(format, nameID string, attrs ...saml.Attribute) *saml.Assertion {
		return &saml.Assertion{Subject: &saml.Subject{NameID: &saml.NameID{Format: format, Value: nameID}},
			AttributeStatements: []saml.AttributeStatement{{Attributes: attrs}}}
	}
	values := func(vs ...string) []saml.AttributeValue {
		var out []saml.AttributeValue
		for _, v := range vs {
			out = append(out, saml.AttributeValue{Value: v})
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		assertion *saml.Assertion
		groupsAt  string
		want      samlIdentity
		refused   bool
	}{
		{"repeated and comma-separated MemberOf", assertion(email, "Ada@Corp.example",
			saml.Attribute{Name: "MemberOf", Values: values("platform", "ops, dev", "platform")},
			saml.Attribute{Name: "displayName", Values: values("Ada L.")}), "",
			samlIdentity{Email: "ada@corp.example", Name: "Ada L.", Groups: []string{"platform", "ops", "dev"}, GroupsAsserted: true}, false},
		{"group attribute by FriendlyName", assertion(email, "ada@corp.example",
			saml.Attribute{Name: "urn:oid:1.3.6.1.4.1.5923.1.1.1.1", FriendlyName: "eduPersonAffiliation", Values: values("Platform")}),
			"eduPersonAffiliation", samlIdentity{Email: "ada@corp.example", Groups: []string{"Platform"}, GroupsAsserted: true}, false},
		{"no group attribute: nothing asserted", assertion(email, "ada@corp.example"), "",
			samlIdentity{Email: "ada@corp.example"}, false},
		{"empty group attribute: asserted, no groups", assertion(email, "ada@corp.example",
			saml.Attribute{Name: "MemberOf"}), "", samlIdentity{Email: "ada@corp.example", GroupsAsserted: true}, false},
		{"unspecified NameID format", assertion(string(saml.UnspecifiedNameIDFormat), "ada@corp.example"), "", samlIdentity{}, true},
		{"persistent NameID", assertion(string(saml.PersistentNameIDFormat), "a1b2c3"), "", samlIdentity{}, true},
		{"NameID with a display name", assertion(email, "Ada <ada@corp.example>"), "", samlIdentity{}, true},
		{"NameID with two addresses", assertion(email, "ada@corp.example, eve@evil.example"), "", samlIdentity{}, true},
		{"NameID not an address", assertion(email, "ada"), "", samlIdentity{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := samlIdentityOf(tc.assertion, tc.groupsAt, "")
			if tc.refused {
				if !errors.Is(err, ErrSAMLResponseInvalid) {
					t.Fatalf("accepted as %+v (%v)", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Email != tc.want.Email || got.Name != tc.want.Name || got.GroupsAsserted != tc.want.GroupsAsserted ||
				strings.Join(got.Groups, "|") != strings.Join(tc.want.Groups, "|") {
				t.Fatalf("identity %+v, want %+v", got, tc.want)
			}
		})
	}
}
