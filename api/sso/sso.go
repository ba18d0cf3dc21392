package sso

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/fault"
)

// Provider types.
const (
	TypeOIDC = "oidc"
	TypeSAML = "saml"
)

// Flow kinds: the instance IdP's sign-in, an organization's SSO sign-in,
// and an owner's dry run of an organization provider.
const (
	KindSocial = "social"
	KindSSO    = "sso"
	KindTest   = "test"
)

const (
	flowTTL       = 10 * time.Minute
	codeTTL       = 5 * time.Minute
	testResultTTL = time.Hour
	// instanceKeyPrefix makes the instance IdP's external identities
	// distinct from every organization provider's (whose keys are IDs).
	instanceKeyPrefix = "idp:"
	// maxGroups bounds the groups one sign-in may assert: more than any
	// team mapping needs, and a bound on the work a provider can cause.
	maxGroups = 1000
)

// Mapping names the claims (OIDC) or attributes (SAML) that carry a
// person's groups, e-mail and name.
type Mapping struct {
	Groups string `json:"groups"`
	Email  string `json:"email"`
	Name   string `json:"name"`
}

// Provider is an organization's identity provider.
type Provider struct {
	ID             string      `db:"id"`
	OrganizationID string      `db:"organization_id"`
	Type           string      `db:"type"`
	Issuer         string      `db:"issuer"`
	Domains        []string    `db:"-"`
	ClientID       string      `db:"oidc_client_id"`
	Scopes         []string    `db:"-"`
	MetadataXML    string      `db:"saml_metadata_xml"`
	Mapping        Mapping     `db:"-"`
	DefaultRole    access.Role `db:"default_role"`
	CreatedBy      string      `db:"created_by"`
	CreatedAt      time.Time   `db:"created_at"`
}

// Identity is what an identity provider asserted about the person signing
// in. GroupsAsserted tells an empty group list (leave every mapped team)
// from an absent attribute (change no team).
type Identity struct {
	ProviderID     string
	Subject        string
	Email          string
	EmailVerified  bool
	Name           string
	Groups         []string
	GroupsAsserted bool
}

// Flow is a sign-in between its start and its callback.
type Flow struct {
	StateHash      []byte     `db:"state_hash"`
	Kind           string     `db:"kind"`
	Provider       string     `db:"provider"`
	OrganizationID *string    `db:"organization_id"`
	InitiatedBy    *string    `db:"initiated_by"`
	Nonce          string     `db:"nonce"`
	VerifierSealed []byte     `db:"pkce_verifier_sealed"`
	CallbackURL    string     `db:"callback_url"`
	BindingHash    []byte     `db:"binding_hash"`
	SAMLRequestID  *string    `db:"saml_request_id"`
	CreatedAt      time.Time  `db:"created_at"`
	ExpiresAt      time.Time  `db:"expires_at"`
	ConsumedAt     *time.Time `db:"consumed_at"`
}

// providerKey names the provider in external identities.
func (f Flow) providerKey() string {
	if f.Kind == KindSocial {
		return instanceKeyPrefix + f.Provider
	}
	return f.Provider
}

// Finish is where the browser goes when a flow ends: the dashboard's
// callbackURL with the one-time code, the test result, or an error code.
type Finish struct {
	CallbackURL string
	SignInCode  string
	TestID      string
}

// Redirect is the callbackURL with the outcome in its query; errCode is
// the public code of a failure ("" on success).
func (f Finish) Redirect(errCode string) string {
	u, err := url.Parse(f.CallbackURL)
	if err != nil {
		return ""
	}
	q := u.Query()
	switch {
	case f.TestID != "":
		q.Set("ssoTest", f.TestID)
	case errCode != "":
		q.Set("signInError", errCode)
	default:
		q.Set("signInCode", f.SignInCode)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// TestResult is what a dry-run sign-in asserted and the teams it would map
// to; Error is its failure's public code.
type TestResult struct {
	ID            string   `db:"id" json:"-"`
	Email         string   `db:"email" json:"email"`
	EmailVerified bool     `db:"email_verified" json:"emailVerified"`
	Groups        []string `db:"-" json:"groups"`
	Teams         []string `db:"-" json:"teams"`
	Error         string   `db:"error" json:"error"`
}

// TrustedCallback checks that a callbackURL is an absolute URL on the
// dashboard's origin: the one-time code is handed to it, so anywhere else
// would hand a session to a stranger.
func TrustedCallback(dashboardURL, callbackURL string) error {
	want, err := url.Parse(dashboardURL)
	if err != nil {
		return ErrCallbackURL
	}
	got, err := url.Parse(callbackURL)
	if err != nil || got.User != nil || got.Fragment != "" || len(callbackURL) > 2000 ||
		!strings.EqualFold(got.Scheme, want.Scheme) || !strings.EqualFold(got.Host, want.Host) {
		return ErrCallbackURL
	}
	return nil
}

// SplitGroups reads a group attribute's values: repeated values, each of
// which may itself be a comma-separated list. Blanks are dropped, case is
// kept (mapping is case-sensitive).
func SplitGroups(values []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, v := range values {
		for g := range strings.SplitSeq(v, ",") {
			if g = strings.TrimSpace(g); g != "" && !seen[g] {
				seen[g] = true
				out = append(out, g)
			}
		}
	}
	return out
}

// EmailDomain returns the lowercase domain of an address.
func EmailDomain(email string) string {
	at := strings.LastIndexByte(email, '@')
	if at < 0 {
		return ""
	}
	return strings.ToLower(email[at+1:])
}

// normalizeDomains validates registered domains: lowercase host names
// with a dot, no duplicates, at least one.
func normalizeDomains(raw []string) ([]string, error) {
	var out []string
	for _, d := range raw {
		d = strings.ToLower(strings.TrimSpace(d))
		if len(d) < 3 || len(d) > 253 || !strings.Contains(d, ".") || strings.HasPrefix(d, ".") ||
			strings.HasSuffix(d, ".") || strings.ContainsFunc(d, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.')
		}) {
			return nil, fmt.Errorf("%w: domain %q", fault.ErrValidation, d)
		}
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	if len(out) == 0 || len(out) > 50 {
		return nil, fmt.Errorf("%w: between 1 and 50 domains", fault.ErrValidation)
	}
	return out, nil
}
