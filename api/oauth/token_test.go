package oauth

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
)

// TestBothReadersJudgeTokensAlike: ReadIssuedAccessToken (the /v1 reader,
// which decodes with the standard library and leaves authenticity to the
// token's row) accepts and refuses exactly the tokens VerifyAccessToken
// (go-jose, with the signature) does, whenever the signature is good; a
// bad signature is the one thing only the verifier sees.
func TestBothReadersJudgeTokensAlike(t *testing.T) {
	t.Parallel()
	seed := []byte("0123456789abcdef0123456789abcdef")
	signer, err := NewSigner(seed)
	if err != nil {
		t.Fatal(err)
	}
	keys := signer.KeySet()
	kid := keys.Keys[0].KeyID
	const issuer, audience = "https://cairn.example", "https://cairn.example/mcp"
	now := time.Now()
	claims := map[string]any{"iss": issuer, "sub": "usr_1", "aud": audience, "exp": now.Add(time.Hour).Unix(),
		"iat": now.Add(-time.Minute).Unix(), "jti": "oat_1", "client_id": "ocl_1", "scope": "mcp:tools", "org_id": "org_1"}
	header := map[string]any{"alg": "EdDSA", "typ": "at+jwt", "kid": kid}
	// signed encodes header and claims as given and signs them with the
	// signer's own key, so only what they say can make them fail.
	signed := func(h, c map[string]any) string {
		part := func(v map[string]any) string {
			raw, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			return base64.RawURLEncoding.EncodeToString(raw)
		}
		input := part(h) + "." + part(c)
		return input + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(ed25519.NewKeyFromSeed(seed), []byte(input)))
	}
	with := func(m map[string]any, k string, v any) map[string]any {
		out := map[string]any{}
		for key, val := range m {
			out[key] = val
		}
		if v == nil {
			delete(out, k)
		} else {
			out[k] = v
		}
		return out
	}
	genuine, err := signer.Sign(Claims{Issuer: issuer, Subject: "usr_1", Audience: jwt.Audience{audience},
		Expiry: jwt.NewNumericDate(now.Add(time.Hour)), IssuedAt: jwt.NewNumericDate(now), ID: "oat_1", ClientID: "ocl_1",
		Scope: "mcp:tools mcp:write", OrganizationID: "org_1"})
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		token string
		valid bool
	}{
		"issued by the signer":        {genuine, true},
		"hand-made, same claims":      {signed(header, claims), true},
		"media type as typ":           {signed(with(header, "typ", "application/at+jwt"), claims), true},
		"audience as a one-item list": {signed(header, with(claims, "aud", []string{audience})), true},
		"another algorithm":           {signed(with(header, "alg", "HS256"), claims), false},
		"no type":                     {signed(with(header, "typ", nil), claims), false},
		"a plain JWT":                 {signed(with(header, "typ", "JWT"), claims), false},
		"no key ID":                   {signed(with(header, "kid", nil), claims), false},
		"an unknown key ID":           {signed(with(header, "kid", "other"), claims), false},
		"a critical extension":        {signed(with(header, "crit", []string{"exp"}), claims), false},
		"another issuer":              {signed(header, with(claims, "iss", "https://elsewhere.example")), false},
		"another audience":            {signed(header, with(claims, "aud", "https://elsewhere.example/mcp")), false},
		"two audiences":               {signed(header, with(claims, "aud", []string{audience, audience})), false},
		"expired":                     {signed(header, with(claims, "exp", now.Add(-time.Hour).Unix())), false},
		"not yet valid":               {signed(header, with(claims, "nbf", now.Add(time.Hour).Unix())), false},
		"issued in the future":        {signed(header, with(claims, "iat", now.Add(time.Hour).Unix())), false},
		"no organization":             {signed(header, with(claims, "org_id", nil)), false},
		"no expiry":                   {signed(header, with(claims, "exp", nil)), false},
		"a string expiry":             {signed(header, with(claims, "exp", "soon")), false},
		"two parts":                   {genuine[:strings.LastIndexByte(genuine, '.')], false},
		"an empty signature":          {genuine[:strings.LastIndexByte(genuine, '.')+1], false},
		"four parts":                  {genuine + ".x", false},
		"a header that is not base64": {"!" + genuine[1:], false},
		"claims that are not JSON": {strings.SplitN(genuine, ".", 2)[0] + "." + base64.RawURLEncoding.EncodeToString([]byte("{")) +
			"." + strings.SplitN(genuine, ".", 3)[2], false},
		"too long": {signed(header, with(claims, "pad", strings.Repeat("x", maxTokenBytes))), false},
		"empty":    {"", false},
	} {
		_, verifyErr := VerifyAccessToken(tc.token, keys, issuer, audience, now, 0)
		_, readErr := ReadIssuedAccessToken(tc.token, keys, issuer, audience, now)
		if (readErr == nil) != tc.valid || (verifyErr == nil) != tc.valid {
			t.Errorf("%s: read %v, verify %v, want valid=%v", name, readErr, verifyErr, tc.valid)
		}
	}

	read, err := ReadIssuedAccessToken(genuine, keys, issuer, audience, now)
	if err != nil {
		t.Fatal(err)
	}
	verified, err := VerifyAccessToken(genuine, keys, issuer, audience, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	if read.ID != verified.ID || read.Subject != verified.Subject || read.OrganizationID != verified.OrganizationID ||
		read.ClientID != verified.ClientID || read.Scope != verified.Scope || !read.Expiry.Time().Equal(verified.Expiry.Time()) {
		t.Fatalf("readers disagree: %+v against %+v", read, verified)
	}

	dot := strings.LastIndexByte(genuine, '.')
	sig := []byte(genuine[dot+1:])
	sig[len(sig)/2] ^= 1
	altered := genuine[:dot+1] + string(sig)
	if _, err := VerifyAccessToken(altered, keys, issuer, audience, now, 0); err == nil {
		t.Fatal("the verifier accepted an altered signature")
	}
	if _, err := ReadIssuedAccessToken(altered, keys, issuer, audience, now); err != nil {
		t.Fatalf("the reader judges the signature, which is the row's to judge: %v", err)
	}
}
