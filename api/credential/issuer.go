package credential

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/platform/seal"
	"github.com/cairnhq/cairn/api/platform/signingkey"
)

// Token lifetimes of the workload-identity issuer; its keys rotate as
// every signing-key ring's do.
const (
	SigningPeriod = signingkey.SigningPeriod
	PublishAhead  = signingkey.PublishAhead
	// MaxTokenLifetime caps a token's life (the phase timeout sets it
	// otherwise); Google's STS refuses longer ones.
	MaxTokenLifetime = signingkey.MaxTokenLifetime
	// ClockSkew backdates iat and nbf, so a verifier whose clock is a
	// little behind Cairn's accepts a token at once.
	ClockSkew = 30 * time.Second
	// MaxSubjectBytes is Google's limit on google.subject.
	MaxSubjectBytes = 127
)

// Issuer is Cairn's OIDC issuer for workload identity: its discovery
// document, its JWKS and RS256 tokens signed with keys of its own (the
// workload-identity ring, used for nothing else), rotated with overlap.
type Issuer struct {
	keys *signingkey.Ring
	url  string
}

// NewIssuer returns the issuer whose identifier is issuerURL
// (CAIRN_PUBLIC_URL followed by IssuerPath). sealer may be nil: nothing is signed then.
func NewIssuer(conn *sqlx.DB, sealer *seal.Sealer, issuerURL string) *Issuer {
	return &Issuer{keys: signingkey.New(conn, sealer, signingkey.WorkloadIdentity), url: strings.TrimRight(issuerURL, "/")}
}

// WithClock returns an issuer reading the time from now (tests let keys
// age without waiting).
func (i *Issuer) WithClock(now func() time.Time) *Issuer {
	return &Issuer{keys: i.keys.WithClock(now), url: i.url}
}

// URL is the issuer identifier, the iss of every token.
func (i *Issuer) URL() string { return i.url }

// IssuerPath is the issuer's path under CAIRN_PUBLIC_URL: the root's
// OpenID discovery document belongs to the agents' authorization server
// (api/authserver), whose tokens are signed with other keys, so the
// workload-identity issuer has an identifier, discovery document and key
// set of its own, and neither issuer's keys verify the other's tokens.
const IssuerPath = "/workload-identity"

// JWKSPath is where the key set is served, under the issuer URL.
const JWKSPath = "/.well-known/jwks.json"

// DiscoveryPath is where the discovery document is served, under the
// issuer URL.
const DiscoveryPath = "/.well-known/openid-configuration"

// Discovery is the issuer's OpenID Provider metadata: enough for a cloud
// (or any OIDC library) to find the keys and the claims it may map.
func (i *Issuer) Discovery() map[string]any {
	return map[string]any{
		"issuer":                                i.url,
		"jwks_uri":                              i.url + JWKSPath,
		"response_types_supported":              []string{"id_token"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"scopes_supported":                      []string{"openid"},
		"claims_supported": []string{"iss", "sub", "aud", "exp", "iat", "nbf", "jti", "organization_id", "organization_name",
			"project_id", "project_name", "workspace_id", "workspace_name", "run_id", "run_phase", "run_initiator"},
	}
}

// JWK is one public key of the key set.
type JWK = signingkey.JWK

// JWKS is the issuer's published key set.
func (i *Issuer) JWKS(ctx context.Context) ([]JWK, error) { return i.keys.JWKS(ctx) }

// Rotate keeps the key set current (see signingkey.Ring.Rotate).
func (i *Issuer) Rotate(ctx context.Context) error { return i.keys.Rotate(ctx) }

// Claims are a workload-identity token's claims. The subject is built from
// stable IDs only; names are informative claims beside it.
type Claims struct {
	Issuer           string `json:"iss"`
	Subject          string `json:"sub"`
	Audience         string `json:"aud"`
	IssuedAt         int64  `json:"iat"`
	NotBefore        int64  `json:"nbf"`
	Expiry           int64  `json:"exp"`
	ID               string `json:"jti"`
	OrganizationID   string `json:"organization_id"`
	OrganizationName string `json:"organization_name"`
	ProjectID        string `json:"project_id"`
	ProjectName      string `json:"project_name"`
	WorkspaceID      string `json:"workspace_id"`
	WorkspaceName    string `json:"workspace_name"`
	RunID            string `json:"run_id"`
	RunPhase         string `json:"run_phase"`
	// RunInitiator is who started the run: user, agent, service_account,
	// code_host, operator or trigger. A cloud's trust policy can refuse
	// runs an agent proposed even after a person released them.
	RunInitiator string `json:"run_initiator"`
}

// Mint signs a token for c (its subject and audience set; run facts
// filled) valid for lifetime, capped at MaxTokenLifetime, with a fresh
// jti and iat and nbf backdated by ClockSkew.
func (i *Issuer) Mint(ctx context.Context, c Claims, lifetime time.Duration) (string, error) {
	var jti [16]byte
	if _, err := rand.Read(jti[:]); err != nil {
		return "", err
	}
	now := i.keys.Now()
	lifetime = min(max(lifetime, time.Minute), MaxTokenLifetime)
	c.Issuer, c.ID = i.url, base64.RawURLEncoding.EncodeToString(jti[:])
	c.IssuedAt, c.NotBefore = now.Add(-ClockSkew).Unix(), now.Add(-ClockSkew).Unix()
	c.Expiry = now.Add(lifetime).Unix()
	return i.keys.Sign(ctx, c)
}

// Subject is the workload-identity subject of a run phase:
// organization:{org}:project:{project}:workspace:{workspace}:run_phase:{phase}.
// Each ID is its 128 random bits in unpadded base64url (22 characters):
// the IDs as issued would make a subject of up to 149 bytes, and Google
// accepts at most 127. The subject never holds a renamable name.
func Subject(organizationID, projectID, workspaceID, runPhase string) (string, error) {
	var parts []string
	for _, id := range []string{organizationID, projectID, workspaceID} {
		c, err := compactID(id)
		if err != nil {
			return "", err
		}
		parts = append(parts, c)
	}
	switch runPhase {
	case RunPhasePlan, RunPhaseApply, RunPhaseSpeculativePlan:
	default:
		return "", fmt.Errorf("run phase %q has no subject", runPhase)
	}
	sub := "organization:" + parts[0] + ":project:" + parts[1] + ":workspace:" + parts[2] + ":run_phase:" + runPhase
	if len(sub) > MaxSubjectBytes {
		return "", fmt.Errorf("subject of %d bytes", len(sub))
	}
	return sub, nil
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// compactID re-encodes an ID's random part (prefix_ and 26 base32
// characters) in base64url.
func compactID(id string) (string, error) {
	_, rest, ok := strings.Cut(id, "_")
	raw, err := idEncoding.DecodeString(rest)
	if !ok || err != nil || len(raw) != 16 {
		return "", fmt.Errorf("identifier %q is not a Cairn ID", id)
	}
	return base64.RawURLEncoding.EncodeToString(raw), nil
}
