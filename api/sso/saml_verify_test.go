package sso

import (
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beevik/etree"
	"github.com/crewjam/saml"
	dsig "github.com/russellhaering/goxmldsig"

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
	idp            *samltest.IdP
	sp             *saml.ServiceProvider
	alice, mallory samltest.User
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
	p := samlProvider{ID: "ssop_test", Issuer: idp.EntityID(), MetadataXML: idp.Metadata()}
	sp, err := newServiceProvider(p, testPublicURL, keys, &memoryLedger{seen: map[string]bool{}}, nil)
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
	mallory := samltest.User{Name: "mallory", Password: "tr0ub4dor", Email: "alice@example.com.evil.com"}
	idp.AddUser(mallory)
	return &verifyFixture{idp: idp, sp: sp, alice: alice, mallory: mallory}
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
	if want := SAMLACSURL(testPublicURL, "ssop_test"); posted.Action != want {
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

func TestSAMLRefusesForgedResponses(t *testing.T) {
	t.Parallel()
	f := newVerifyFixture(t, false)
	otherKey, otherCert := samltest.KeyPair(t)
	sha256 := dsig.RSASHA256SignatureMethod
	cases := []struct {
		name   string
		forge  func(t *testing.T, posted samltest.Posted, requestID string) (string, string)
		reason string
	}{
		{"honest re-signature is accepted (control)", func(t *testing.T, p samltest.Posted, id string) (string, string) {
			return samltest.Resign(t, p.SAMLResponse, f.idp.Key, f.idp.Certificate, sha256, nil), id
		}, ""},
		{"another key's signature", func(t *testing.T, p samltest.Posted, id string) (string, string) {
			return samltest.Resign(t, p.SAMLResponse, otherKey, otherCert, sha256, nil), id
		}, "Could not verify certificate"},
		{"SHA-1 signature", func(t *testing.T, p samltest.Posted, id string) (string, string) {
			return samltest.Resign(t, p.SAMLResponse, f.idp.Key, f.idp.Certificate, dsig.RSASHA1SignatureMethod, nil), id
		}, "SHA-1"},
		{"second unsigned assertion beside the signed one", func(t *testing.T, p samltest.Posted, id string) (string, string) {
			// The IdP's signed assertion in an unsigned Response, an
			// unsigned one for someone else before it (CVE-2022-41912).
			honest := samltest.Resign(t, p.SAMLResponse, f.idp.Key, f.idp.Certificate, sha256, nil)
			doc := samltest.Decode(t, honest)
			signed := samltest.Assertion(t, doc)
			evil := signed.Copy()
			for _, c := range evil.ChildElements() {
				if c.Tag == "Signature" {
					evil.RemoveChild(c)
				}
			}
			evil.CreateAttr("ID", "id-evil")
			samltest.SetText(t, evil, "./Subject/NameID", "mallory@example.com")
			doc.Root().InsertChildAt(signed.Index(), evil)
			return samltest.Encode(t, doc), id
		}, "exactly one Assertion"},
		{"NameID with an injected comment", func(t *testing.T, _ samltest.Posted, _ string) (string, string) {
			// Mallory owns alice@example.com.evil.com at the IdP; the
			// comment leaves the signed (canonical) text unchanged.
			p, id := f.signIn(t, f.mallory)
			doc := samltest.Decode(t, p.SAMLResponse)
			nameID := samltest.Assertion(t, doc).FindElement("./Subject/NameID")
			nameID.SetText("alice@example.com")
			nameID.AddChild(etree.NewComment(""))
			nameID.AddChild(etree.NewText(".evil.com"))
			return samltest.Encode(t, doc), id
		}, "comment"},
		{"wrong audience", func(t *testing.T, p samltest.Posted, id string) (string, string) {
			return samltest.Resign(t, p.SAMLResponse, f.idp.Key, f.idp.Certificate, sha256, func(doc *etree.Document) {
				samltest.SetText(t, samltest.Assertion(t, doc), "./Conditions/AudienceRestriction/Audience", "https://other.example/sp")
			}), id
		}, "AudienceRestriction"},
		{"expired NotOnOrAfter", func(t *testing.T, p samltest.Posted, id string) (string, string) {
			past := samltest.Timestamp(time.Now().Add(-time.Hour))
			return samltest.Resign(t, p.SAMLResponse, f.idp.Key, f.idp.Certificate, sha256, func(doc *etree.Document) {
				samltest.SetAttr(t, samltest.Assertion(t, doc), "./Conditions", "NotOnOrAfter", past)
			}), id
		}, "Conditions is expired"},
		{"mismatched InResponseTo", func(t *testing.T, p samltest.Posted, _ string) (string, string) {
			return p.SAMLResponse, "id-another-request"
		}, "InResponseTo"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			posted, requestID := f.signIn(t, f.alice)
			forged, expectID := tc.forge(t, posted, requestID)
			id, err := f.verify(t, forged, expectID)
			if tc.name == "honest re-signature is accepted (control)" {
				if err != nil {
					t.Fatalf("the control was refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted as %+v", id)
			}
			if !errors.Is(err, ErrSAMLResponseInvalid) {
				t.Fatalf("error %v is not ErrSAMLResponseInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("refused for another reason than %q: %v", tc.reason, err)
			}
		})
	}
}

func TestSAMLRefusesReplayedAssertion(t *testing.T) {
	t.Parallel()
	f := newVerifyFixture(t, false)
	first, firstID := f.signIn(t, f.alice)
	if _, err := f.verify(t, first.SAMLResponse, firstID); err != nil {
		t.Fatal(err)
	}
	// The same assertion ID answering a second, genuine request: only the
	// ledger can tell.
	second, secondID := f.signIn(t, f.alice)
	oldAssertionID := samltest.Assertion(t, samltest.Decode(t, first.SAMLResponse)).SelectAttrValue("ID", "")
	replayed := samltest.Resign(t, second.SAMLResponse, f.idp.Key, f.idp.Certificate, dsig.RSASHA256SignatureMethod, func(doc *etree.Document) {
		samltest.Assertion(t, doc).CreateAttr("ID", oldAssertionID)
	})
	if _, err := f.verify(t, replayed, secondID); !errors.Is(err, saml.ErrAssertionReplayed) || !errors.Is(err, ErrSAMLResponseInvalid) {
		t.Fatalf("replayed assertion: %v", err)
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

func TestSAMLMetadataURLs(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(SAMLMetadataURL("https://cairn.test/", "ssop_1"))
	if err != nil || u.Path != "/api/auth/sso/saml2/sp/metadata" || u.Query().Get("providerId") != "ssop_1" {
		t.Fatalf("metadata URL %v %v", u, err)
	}
	if got := SAMLACSURL("https://cairn.test/", "ssop_1"); got != "https://cairn.test/api/auth/sso/saml2/sp/acs/ssop_1" {
		t.Fatalf("ACS URL %q", got)
	}
}
