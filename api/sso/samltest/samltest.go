package samltest

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/beevik/etree"
	"github.com/crewjam/saml/logger"
	"github.com/crewjam/saml/samlidp"
	dsig "github.com/russellhaering/goxmldsig"
)

// IdP is a running samlidp.
type IdP struct {
	URL         string // base URL; the entity ID is URL+"/metadata"
	Key         *rsa.PrivateKey
	Certificate *x509.Certificate
	Server      *samlidp.Server
	t           testing.TB
}

// KeyPair makes an RSA key and a self-signed certificate.
func KeyPair(t testing.TB) (*rsa.PrivateKey, *x509.Certificate) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "samltest"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert
}

// Start runs an IdP on 127.0.0.1 with a fresh key; it stops with the test.
func Start(t testing.TB) *IdP {
	t.Helper()
	key, cert := KeyPair(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	u, _ := url.Parse(base)
	srv, err := samlidp.New(samlidp.Options{URL: *u, Key: key, Certificate: cert, Store: &samlidp.MemoryStore{},
		Logger: logger.Interface(log.New(io.Discard, "", 0))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv)
	hs.Listener.Close()
	hs.Listener = ln
	hs.Start()
	t.Cleanup(hs.Close)
	return &IdP{URL: base, Key: key, Certificate: cert, Server: srv, t: t}
}

// EntityID is the IdP's entity ID (samlidp's metadata URL).
func (p *IdP) EntityID() string { return p.URL + "/metadata" }

// Metadata is the IdP's metadata XML, as an owner would paste it.
func (p *IdP) Metadata() string {
	p.t.Helper()
	return string(p.get("/metadata"))
}

func (p *IdP) get(path string) []byte {
	p.t.Helper()
	res, err := http.Get(p.URL + path)
	if err != nil {
		p.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		p.t.Fatalf("GET %s: %d %s", path, res.StatusCode, body)
	}
	return body
}

func (p *IdP) put(path string, body []byte) {
	p.t.Helper()
	req, _ := http.NewRequest(http.MethodPut, p.URL+path, bytes.NewReader(body))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(res.Body)
		p.t.Fatalf("PUT %s: %d %s", path, res.StatusCode, msg)
	}
}

// TrustSP registers a service provider's metadata with the IdP.
func (p *IdP) TrustSP(id, metadataXML string) {
	p.t.Helper()
	p.put("/services/"+url.PathEscape(id), []byte(metadataXML))
}

// User is a person at the IdP; samlidp asserts Email as the NameID and
// Groups as eduPersonAffiliation.
type User struct {
	Name, Password, Email, CommonName string
	Groups                            []string
}

// AddUser creates or replaces a user.
func (p *IdP) AddUser(u User) {
	p.t.Helper()
	body, _ := json.Marshal(map[string]any{"name": u.Name, "password": u.Password, "email": u.Email,
		"common_name": u.CommonName, "groups": u.Groups})
	p.put("/users/"+url.PathEscape(u.Name), body)
}

// Posted is what the IdP's auto-submitting form would post to the ACS.
type Posted struct {
	Action       string
	SAMLResponse string
	RelayState   string
}

// Form is the ACS form body.
func (p Posted) Form() url.Values {
	v := url.Values{"SAMLResponse": {p.SAMLResponse}}
	if p.RelayState != "" {
		v.Set("RelayState", p.RelayState)
	}
	return v
}

// SignIn follows the SP's redirect to the IdP, logs in as user and returns
// the response the IdP's form would post back, without posting it.
func (p *IdP) SignIn(redirectURL string, user User) Posted {
	p.t.Helper()
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback test IdP
	res, err := client.Get(redirectURL)
	if err != nil {
		p.t.Fatal(err)
	}
	page := readPage(p.t, res)
	action, fields := formOf(p.t, page)
	fields.Set("user", user.Name)
	fields.Set("password", user.Password)
	target, err := res.Request.URL.Parse(action)
	if err != nil {
		p.t.Fatal(err)
	}
	res, err = client.PostForm(target.String(), fields)
	if err != nil {
		p.t.Fatal(err)
	}
	page = readPage(p.t, res)
	action, fields = formOf(p.t, page)
	if fields.Get("SAMLResponse") == "" {
		p.t.Fatalf("the IdP answered no SAMLResponse: %s", page)
	}
	return Posted{Action: action, SAMLResponse: fields.Get("SAMLResponse"), RelayState: fields.Get("RelayState")}
}

// Unsolicited is an IdP-initiated response for the registered SP id,
// through a samlidp shortcut.
func (p *IdP) Unsolicited(spEntityID string, user User) Posted {
	p.t.Helper()
	body, _ := json.Marshal(map[string]any{"name": "cairn", "service_provider": spEntityID})
	p.put("/shortcuts/cairn", body)
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar}
	res, err := client.PostForm(p.URL+"/login", url.Values{"user": {user.Name}, "password": {user.Password}})
	if err != nil {
		p.t.Fatal(err)
	}
	readPage(p.t, res)
	res, err = client.Get(p.URL + "/login/cairn")
	if err != nil {
		p.t.Fatal(err)
	}
	page := readPage(p.t, res)
	action, fields := formOf(p.t, page)
	if fields.Get("SAMLResponse") == "" {
		p.t.Fatalf("the IdP answered no SAMLResponse: %s", page)
	}
	return Posted{Action: action, SAMLResponse: fields.Get("SAMLResponse"), RelayState: fields.Get("RelayState")}
}

func readPage(t testing.TB, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", res.Request.Method, res.Request.URL, res.StatusCode, body)
	}
	return string(body)
}

var (
	formAction = regexp.MustCompile(`<form[^>]*action="([^"]*)"`)
	formInput  = regexp.MustCompile(`<input[^>]*name="([^"]*)"[^>]*value="([^"]*)"`)
)

// formOf reads the first form's action and its named inputs' values.
func formOf(t testing.TB, page string) (string, url.Values) {
	t.Helper()
	m := formAction.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no form in %s", page)
	}
	fields := url.Values{}
	for _, in := range formInput.FindAllStringSubmatch(page, -1) {
		fields.Set(html.UnescapeString(in[1]), html.UnescapeString(in[2]))
	}
	return html.UnescapeString(m[1]), fields
}

// Decode is a posted SAMLResponse as XML.
func Decode(t testing.TB, samlResponse string) *etree.Document {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(samlResponse)
	if err != nil {
		t.Fatal(err)
	}
	doc := etree.NewDocument()
	if err := doc.ReadFromBytes(raw); err != nil {
		t.Fatal(err)
	}
	return doc
}

// Encode is doc as a SAMLResponse form value.
func Encode(t testing.TB, doc *etree.Document) string {
	t.Helper()
	raw, err := doc.WriteToBytes()
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(raw)
}

// Assertion is the response's (first) Assertion element.
func Assertion(t testing.TB, doc *etree.Document) *etree.Element {
	t.Helper()
	el := doc.Root().FindElement("./Assertion")
	if el == nil {
		t.Fatal("the response has no Assertion")
	}
	return el
}

// Resign edits a posted response and signs its assertion again with key
// and cert, using signatureMethod (dsig.RSASHA256SignatureMethod for an
// honest one): the response an attacker holding key would forge. Any
// signature on the response or the assertion is removed first.
func Resign(t testing.TB, samlResponse string, key *rsa.PrivateKey, cert *x509.Certificate, signatureMethod string, edit func(doc *etree.Document)) string {
	t.Helper()
	doc := Decode(t, samlResponse)
	root := doc.Root()
	removeSignature(root)
	assertion := Assertion(t, doc)
	removeSignature(assertion)
	if edit != nil {
		edit(doc)
	}
	assertion = Assertion(t, doc)
	signed := SignElement(t, assertion, key, cert, signatureMethod)
	root.InsertChildAt(assertion.Index(), signed)
	root.RemoveChild(assertion)
	return Encode(t, doc)
}

// SignElement returns el with an enveloped signature, placed after its
// Issuer as SAML requires.
func SignElement(t testing.TB, el *etree.Element, key *rsa.PrivateKey, cert *x509.Certificate, signatureMethod string) *etree.Element {
	t.Helper()
	ctx := dsig.NewDefaultSigningContext(dsig.TLSCertKeyStore(tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert}))
	ctx.Canonicalizer = dsig.MakeC14N10ExclusiveCanonicalizerWithPrefixList("")
	// The digest follows the method: SHA-1 for rsa-sha1, as an old IdP's.
	if err := ctx.SetSignatureMethod(signatureMethod); err != nil {
		t.Fatal(err)
	}
	sig, err := ctx.ConstructSignature(el, true)
	if err != nil {
		t.Fatal(err)
	}
	out := el.Copy()
	issuer := out.FindElement("./Issuer")
	at := 0
	if issuer != nil {
		at = issuer.Index() + 1
	}
	out.InsertChildAt(at, sig)
	return out
}

func removeSignature(el *etree.Element) {
	for _, c := range el.ChildElements() {
		if c.Tag == "Signature" {
			el.RemoveChild(c)
		}
	}
}

// SetText replaces the text of the first element at path under el.
func SetText(t testing.TB, el *etree.Element, path, text string) {
	t.Helper()
	found := el.FindElement(path)
	if found == nil {
		t.Fatalf("no %s", path)
	}
	found.SetText(text)
}

// SetAttr sets an attribute on every element at path under el.
func SetAttr(t testing.TB, el *etree.Element, path, attr, value string) {
	t.Helper()
	found := el.FindElements(path)
	if len(found) == 0 {
		t.Fatalf("no %s", path)
	}
	for _, f := range found {
		f.CreateAttr(attr, value)
	}
}

// Timestamp is t in SAML's format.
func Timestamp(at time.Time) string { return at.UTC().Format("2006-01-02T15:04:05.000Z") }

// String makes a posted response readable in a failure message.
func String(t testing.TB, samlResponse string) string {
	raw, _ := base64.StdEncoding.DecodeString(samlResponse)
	return strings.TrimSpace(fmt.Sprint(string(raw)))
}

// WithoutEncryption is SP metadata without its encryption key: an IdP
// given it sends the assertion in the clear, which a forger can then edit.
// (With the key, samlidp encrypts every assertion to the SP.)
func WithoutEncryption(t testing.TB, metadataXML string) string {
	t.Helper()
	doc := etree.NewDocument()
	if err := doc.ReadFromString(metadataXML); err != nil {
		t.Fatal(err)
	}
	for _, kd := range doc.FindElements("//KeyDescriptor[@use='encryption']") {
		kd.Parent().RemoveChild(kd)
	}
	out, err := doc.WriteToString()
	if err != nil {
		t.Fatal(err)
	}
	return out
}
