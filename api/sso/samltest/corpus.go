package samltest

import (
	"testing"
	"time"

	"github.com/beevik/etree"
	dsig "github.com/russellhaering/goxmldsig"
)

// Rig is what the negative corpus needs from a test: its IdP (trusting the
// SP without its encryption key, so assertions come in the clear), a way
// to start an SP-initiated sign-in, and an assertion the SP already took.
type Rig struct {
	IdP *IdP
	// Start begins a sign-in for an address and returns the IdP URL the
	// SP redirects to.
	Start func(t testing.TB, email string) string
	// Victim is the person each forgery tries to sign in; Mallory has
	// Victim's address with ".evil.com" appended, at the same IdP.
	Victim, Mallory User
	// Accepted is a response the SP has accepted already.
	Accepted Posted
}

// Forgery is one response the SP must refuse without signing anyone in.
type Forgery struct {
	Name  string
	Forge func(t testing.TB, r Rig) Posted
	// FlowSpent marks the forgery whose flow was used before: the SP
	// refuses it for that, before reading the response.
	FlowSpent bool
}

// Corpus is the negative corpus: every response an attacker (or a broken
// IdP) could post that must be refused with nothing created.
func Corpus() []Forgery {
	sha256 := dsig.RSASHA256SignatureMethod
	victimAnswer := func(t testing.TB, r Rig) Posted {
		return r.IdP.SignIn(r.Start(t, r.Victim.Email), r.Victim)
	}
	return []Forgery{
		{Name: "second unsigned assertion beside the signed one", Forge: func(t testing.TB, r Rig) Posted {
			// The IdP's signed assertion in an unsigned Response, with an
			// unsigned copy before it (CVE-2022-41912's shape).
			p := victimAnswer(t, r)
			doc := Decode(t, Resign(t, p.SAMLResponse, r.IdP.Key, r.IdP.Certificate, sha256, nil))
			signed := Assertion(t, doc)
			evil := signed.Copy()
			removeSignature(evil)
			evil.CreateAttr("ID", "id-unsigned-copy")
			doc.Root().InsertChildAt(signed.Index(), evil)
			p.SAMLResponse = Encode(t, doc)
			return p
		}},
		{Name: "another key's signature", Forge: func(t testing.TB, r Rig) Posted {
			key, cert := KeyPair(t)
			p := victimAnswer(t, r)
			p.SAMLResponse = Resign(t, p.SAMLResponse, key, cert, sha256, nil)
			return p
		}},
		{Name: "SHA-1 signature", Forge: func(t testing.TB, r Rig) Posted {
			p := victimAnswer(t, r)
			p.SAMLResponse = Resign(t, p.SAMLResponse, r.IdP.Key, r.IdP.Certificate, dsig.RSASHA1SignatureMethod, nil)
			return p
		}},
		{Name: "NameID with an injected comment", Forge: func(t testing.TB, r Rig) Posted {
			// Mallory's genuine, signed answer; the comment splits her
			// address so that its first text node is the victim's, and
			// leaves the signed (canonical) text as it was.
			p := r.IdP.SignIn(r.Start(t, r.Victim.Email), r.Mallory)
			doc := Decode(t, p.SAMLResponse)
			nameID := Assertion(t, doc).FindElement("./Subject/NameID")
			nameID.SetText(r.Victim.Email)
			nameID.AddChild(etree.NewComment(""))
			nameID.AddChild(etree.NewText(r.Mallory.Email[len(r.Victim.Email):]))
			p.SAMLResponse = Encode(t, doc)
			return p
		}},
		{Name: "replayed assertion ID", Forge: func(t testing.TB, r Rig) Posted {
			// A genuine answer to a new request that carries the ID of an
			// assertion already accepted: only the replay ledger knows.
			accepted := Assertion(t, Decode(t, r.Accepted.SAMLResponse)).SelectAttrValue("ID", "")
			p := victimAnswer(t, r)
			p.SAMLResponse = Resign(t, p.SAMLResponse, r.IdP.Key, r.IdP.Certificate, sha256, func(doc *etree.Document) {
				Assertion(t, doc).CreateAttr("ID", accepted)
			})
			return p
		}},
		{Name: "wrong audience", Forge: func(t testing.TB, r Rig) Posted {
			p := victimAnswer(t, r)
			p.SAMLResponse = Resign(t, p.SAMLResponse, r.IdP.Key, r.IdP.Certificate, sha256, func(doc *etree.Document) {
				SetText(t, Assertion(t, doc), "./Conditions/AudienceRestriction/Audience", "https://other.example/sp")
			})
			return p
		}},
		{Name: "expired NotOnOrAfter", Forge: func(t testing.TB, r Rig) Posted {
			p := victimAnswer(t, r)
			p.SAMLResponse = Resign(t, p.SAMLResponse, r.IdP.Key, r.IdP.Certificate, sha256, func(doc *etree.Document) {
				SetAttr(t, Assertion(t, doc), "./Conditions", "NotOnOrAfter", Timestamp(time.Now().Add(-time.Hour)))
			})
			return p
		}},
		{Name: "mismatched InResponseTo", Forge: func(t testing.TB, r Rig) Posted {
			// The IdP's genuine answer to one sign-in, posted with another
			// sign-in's RelayState.
			p := victimAnswer(t, r)
			p.RelayState = victimAnswer(t, r).RelayState
			return p
		}},
		{Name: "accepted response posted again", Forge: func(t testing.TB, r Rig) Posted { return r.Accepted }, FlowSpent: true},
	}
}
