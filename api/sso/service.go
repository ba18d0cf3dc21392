package sso

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"golang.org/x/oauth2"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/identity"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/platform/seal"
	"github.com/cairnhq/cairn/api/team"
)

// Options configure the SSO service.
type Options struct {
	// PublicURL is the API's base URL (callbacks live under it);
	// DashboardURL the origin every callbackURL must be on.
	PublicURL    string
	DashboardURL string
	// FlowKey keys the stored hashes of states and sign-in codes.
	FlowKey []byte
	// Sealer seals PKCE verifiers, client secrets and the session token a
	// code stands for; nil closes every federated sign-in.
	Sealer *seal.Sealer
	IdP    InstanceIdP
	// HTTPClient reaches identity providers (nil: a 10-second client).
	HTTPClient *http.Client
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// SAMLStarter starts SAML sign-ins (api/sso's SAML service provider).
type SAMLStarter interface {
	// AuthnRequest returns the IdP's SSO URL carrying an AuthnRequest
	// (redirect binding) with relayState, and the request's ID, which the
	// response's InResponseTo must name.
	AuthnRequest(ctx context.Context, p Provider, relayState string) (redirectURL, requestID string, err error)
	// ValidateMetadata checks IdP metadata before it is registered.
	ValidateMetadata(metadataXML string) error
}

// Service is federated sign-in and organization SSO.
type Service struct {
	db       *sqlx.DB
	identity *identity.Service
	opts     Options
	now      func() time.Time
	// SAML starts SAML sign-ins; nil refuses SAML providers.
	SAML SAMLStarter

	mu      sync.Mutex
	parties map[string]*relyingParty
}

// NewService returns the SSO service.
func NewService(conn *sqlx.DB, ident *identity.Service, opts Options) *Service {
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	bounded := *opts.HTTPClient
	bounded.Transport = boundedTransport{cmp.Or[http.RoundTripper](bounded.Transport, http.DefaultTransport)}
	opts.HTTPClient = &bounded
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	opts.PublicURL = strings.TrimRight(opts.PublicURL, "/")
	return &Service{db: conn, identity: ident, opts: opts, now: now, parties: map[string]*relyingParty{}}
}

// maxIdPResponseBytes bounds every answer read from an identity provider
// (discovery, keys, tokens, userinfo): a provider is whatever URL an
// organization owner registered, and its answers are read whole.
const maxIdPResponseBytes = 1 << 20

// boundedTransport cuts every response body at maxIdPResponseBytes: a
// longer answer fails to read rather than fill memory.
type boundedTransport struct{ base http.RoundTripper }

func (t boundedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err == nil {
		resp.Body = http.MaxBytesReader(nil, resp.Body, maxIdPResponseBytes)
	}
	return resp, err
}

func (s *Service) stamp() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// SocialProvider is a "Continue with …" button.
type SocialProvider struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// SocialProviders lists the instance IdP when it is ready (none otherwise).
func (s *Service) SocialProviders() []SocialProvider {
	if !s.opts.IdP.Ready() {
		return []SocialProvider{}
	}
	return []SocialProvider{{ID: s.opts.IdP.Name, Name: s.opts.IdP.DisplayName()}}
}

// SocialCallbackURL is where the instance IdP sends the browser back.
func (s *Service) SocialCallbackURL() string {
	return s.opts.PublicURL + "/api/auth/callback/" + url.PathEscape(s.opts.IdP.Name)
}

// CallbackURL is an organization OIDC provider's redirect URI.
func (s *Service) CallbackURL(providerID string) string {
	return s.opts.PublicURL + "/api/auth/sso/callback/" + url.PathEscape(providerID)
}

// SPMetadataURL is where a SAML provider's service-provider metadata is
// served; it is also the SP's entity ID.
func (s *Service) SPMetadataURL(providerID string) string {
	return s.opts.PublicURL + "/api/auth/sso/saml2/sp/metadata?providerId=" + url.QueryEscape(providerID)
}

// ACSURL is a SAML provider's assertion consumer service.
func (s *Service) ACSURL(providerID string) string {
	return s.opts.PublicURL + "/api/auth/sso/saml2/sp/acs/" + url.PathEscape(providerID)
}

func (s *Service) keyedHash(kind, v string) []byte {
	m := hmac.New(sha256.New, s.opts.FlowKey)
	m.Write([]byte(kind + "\x00" + v))
	return m.Sum(nil)
}

func randomToken(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating random token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// parseBinding reads clientBinding at a flow's start: the base64url
// SHA-256 of a secret the browser keeps.
func parseBinding(raw string) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(raw, "="))
	if err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("%w: clientBinding must be the base64url SHA-256 of a browser-bound secret", fault.ErrValidation)
	}
	return b, nil
}

// instanceParty returns the instance IdP's relying party, discovered once.
func (s *Service) instanceParty(name string) (*relyingParty, error) {
	idp := s.opts.IdP
	if name != idp.Name || name == "" {
		return nil, ErrUnknownProvider
	}
	if !idp.Ready() {
		return nil, ErrIdPUnconfigured
	}
	return s.party("idp:"+name, func() (*relyingParty, error) {
		if name == "github" {
			return newGitHubRelyingParty(s.opts.HTTPClient, idp.GitHubURLs, idp.ClientID, idp.ClientSecret, s.SocialCallbackURL()), nil
		}
		return newOIDCRelyingParty(s.opts.HTTPClient, idp.issuer(), idp.ClientID, idp.ClientSecret, s.SocialCallbackURL(),
			[]string{"openid", "email", "profile"}, Mapping{Groups: "groups", Email: "email", Name: "name"})
	})
}

// providerParty returns an organization OIDC provider's relying party.
func (s *Service) providerParty(row providerRow) (*relyingParty, error) {
	p := row.provider()
	return s.party(p.ID+"|"+p.Issuer, func() (*relyingParty, error) {
		if s.opts.Sealer == nil {
			return nil, ErrSealUnavailable
		}
		secret, err := s.opts.Sealer.Open(row.SecretSealed, []byte("sso-client-secret:"+p.ID))
		if err != nil {
			return nil, fmt.Errorf("opening the client secret: %w", err)
		}
		return newOIDCRelyingParty(s.opts.HTTPClient, p.Issuer, p.ClientID, string(secret), s.CallbackURL(p.ID), p.Scopes, p.Mapping)
	})
}

// party caches relying parties by key; a failed discovery is not cached,
// so the next sign-in tries again.
func (s *Service) party(key string, build func() (*relyingParty, error)) (*relyingParty, error) {
	s.mu.Lock()
	rp, ok := s.parties[key]
	s.mu.Unlock()
	if ok {
		return rp, nil
	}
	rp, err := build()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.parties[key] = rp
	s.mu.Unlock()
	return rp, nil
}

// StartInput starts a sign-in: where to send the browser back, and the
// hash of the secret that browser keeps.
type StartInput struct {
	CallbackURL   string
	ClientBinding string
}

// newFlow validates a start and fills a flow's common fields; the state
// is returned to travel through the browser, never stored.
func (s *Service) newFlow(kind, provider string, in StartInput) (Flow, string, error) {
	if err := TrustedCallback(s.opts.DashboardURL, in.CallbackURL); err != nil {
		return Flow{}, "", err
	}
	binding, err := parseBinding(in.ClientBinding)
	if err != nil {
		return Flow{}, "", err
	}
	if s.opts.Sealer == nil {
		return Flow{}, "", ErrSealUnavailable
	}
	state, err := randomToken(32)
	if err != nil {
		return Flow{}, "", err
	}
	nonce, err := randomToken(16)
	if err != nil {
		return Flow{}, "", err
	}
	now := s.stamp()
	return Flow{StateHash: s.keyedHash("state", state), Kind: kind, Provider: provider, Nonce: nonce,
		CallbackURL: in.CallbackURL, BindingHash: binding, CreatedAt: now, ExpiresAt: now.Add(flowTTL)}, state, nil
}

// startOIDC records an OIDC flow with its sealed PKCE verifier and
// returns the provider's authorization URL.
func (s *Service) startOIDC(ctx context.Context, rp *relyingParty, f Flow, state string) (string, error) {
	verifier := oauth2.GenerateVerifier()
	sealed, err := s.opts.Sealer.Seal([]byte(verifier), f.StateHash)
	if err != nil {
		return "", fmt.Errorf("sealing the PKCE verifier: %w", err)
	}
	f.VerifierSealed = sealed
	if err := insertFlow(ctx, s.db, f); err != nil {
		return "", err
	}
	return rp.authorizationURL(state, f.Nonce, verifier), nil
}

// StartSocial starts a sign-in through the instance IdP.
func (s *Service) StartSocial(ctx context.Context, provider string, in StartInput) (string, error) {
	rp, err := s.instanceParty(provider)
	if err != nil {
		return "", err
	}
	f, state, err := s.newFlow(KindSocial, provider, in)
	if err != nil {
		return "", err
	}
	return s.startOIDC(ctx, rp, f, state)
}

// SSOStartInput starts an organization SSO sign-in, found by the
// address's domain, by the organization's slug or by the provider's ID
// (where an unsolicited SAML response sends the dashboard).
type SSOStartInput struct {
	StartInput
	Email            string
	OrganizationSlug string
	ProviderID       string
}

// StartSSO starts a sign-in through an organization's provider.
func (s *Service) StartSSO(ctx context.Context, in SSOStartInput) (string, error) {
	var row providerRow
	var err error
	switch {
	case in.Email != "":
		email, nerr := identity.NormalizeEmail(in.Email)
		if nerr != nil {
			return "", nerr
		}
		row, err = providerByDomain(ctx, s.db, EmailDomain(email))
	case in.OrganizationSlug != "":
		row, err = providerBySlug(ctx, s.db, in.OrganizationSlug)
	case in.ProviderID != "":
		row, err = providerByID(ctx, s.db, in.ProviderID)
	default:
		return "", fmt.Errorf("%w: email, organizationSlug or providerId", fault.ErrValidation)
	}
	if err != nil {
		return "", err
	}
	return s.startProvider(ctx, KindSSO, row, in.StartInput, nil)
}

// StartTest starts an owner's dry run of one of their organization's
// providers: the callback records what the provider asserted and which
// teams it would map to, and changes nothing else.
func (s *Service) StartTest(ctx context.Context, p access.Principal, providerID string, in StartInput) (string, error) {
	if err := requireOwner(p); err != nil {
		return "", err
	}
	row, err := providerByID(ctx, s.db, providerID)
	if err != nil || row.OrganizationID != p.OrganizationID {
		return "", cmp.Or(err, ErrUnknownProvider)
	}
	return s.startProvider(ctx, KindTest, row, in, &p.ID)
}

func (s *Service) startProvider(ctx context.Context, kind string, row providerRow, in StartInput, initiatedBy *string) (string, error) {
	f, state, err := s.newFlow(kind, row.ID, in)
	if err != nil {
		return "", err
	}
	f.OrganizationID, f.InitiatedBy = &row.OrganizationID, initiatedBy
	if row.Type == TypeSAML {
		if s.SAML == nil {
			return "", ErrSAMLUnavailable
		}
		redirect, requestID, err := s.SAML.AuthnRequest(ctx, row.provider(), state)
		if err != nil {
			return "", err
		}
		f.SAMLRequestID = &requestID
		return redirect, insertFlow(ctx, s.db, f)
	}
	rp, err := s.providerParty(row)
	if err != nil {
		return "", err
	}
	return s.startOIDC(ctx, rp, f, state)
}

// ConsumeFlow spends the flow a callback's state names. Its first
// callback consumes it, whatever the outcome; an unknown state is
// ErrStateInvalid, an expired or used one ErrStateExpired (the flow is
// returned then too, so the browser can be sent back to its callbackURL).
func (s *Service) ConsumeFlow(ctx context.Context, state string) (Flow, error) {
	if state == "" {
		return Flow{}, ErrStateInvalid
	}
	var f Flow
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var err error
		f, err = consumeFlow(ctx, tx, s.keyedHash("state", state), s.stamp())
		return err
	})
	if err != nil {
		return Flow{}, err
	}
	if f.ConsumedAt != nil || !s.now().Before(f.ExpiresAt) {
		return f, ErrStateExpired
	}
	return f, nil
}

// FinishOIDC handles an OIDC callback. route is the provider the callback
// came to: the instance IdP's name (social) or an organization provider's
// ID. The Finish names the flow's callbackURL whenever the flow is known,
// also on error, so the browser can be sent back there.
func (s *Service) FinishOIDC(ctx context.Context, social bool, route, state, code, idpError string) (Finish, error) {
	f, err := s.ConsumeFlow(ctx, state)
	if errors.Is(err, ErrStateInvalid) {
		return Finish{}, err
	}
	back := Finish{CallbackURL: f.CallbackURL}
	if err == nil && (f.Provider != route || (f.Kind == KindSocial) != social) {
		err = ErrStateInvalid
	}
	if err == nil && idpError != "" {
		err = fmt.Errorf("%w: %s", ErrIdPError, truncate(idpError, 100))
	}
	var ident Identity
	if err == nil {
		ident, err = s.oidcIdentity(ctx, f, code)
	}
	if err != nil {
		return s.failed(ctx, f, back, err)
	}
	return s.CompleteSignIn(ctx, f, ident)
}

func (s *Service) oidcIdentity(ctx context.Context, f Flow, code string) (Identity, error) {
	var rp *relyingParty
	var err error
	if f.Kind == KindSocial {
		rp, err = s.instanceParty(f.Provider)
	} else {
		var row providerRow
		if row, err = providerByID(ctx, s.db, f.Provider); err == nil {
			rp, err = s.providerParty(row)
		}
	}
	if err != nil {
		return Identity{}, err
	}
	if code == "" {
		return Identity{}, fmt.Errorf("no code: %w", ErrIdPError)
	}
	verifier, err := s.opts.Sealer.Open(f.VerifierSealed, f.StateHash)
	if err != nil {
		return Identity{}, fmt.Errorf("opening the PKCE verifier: %w", err)
	}
	ident, err := rp.identity(ctx, code, string(verifier), f.Nonce)
	ident.ProviderID = f.Provider
	return ident, err
}

// failed records a dry run's failure for its owner; other flows' failures
// are the caller's to report.
func (s *Service) failed(ctx context.Context, f Flow, back Finish, cause error) (Finish, error) {
	if f.Kind != KindTest || f.OrganizationID == nil || f.InitiatedBy == nil {
		return back, cause
	}
	return s.recordTest(ctx, f, TestResult{Error: publicReason(cause)})
}

// FailFlow ends a flow whose provider's answer did not verify: a dry run
// records the failure for its owner and sends the browser to its result;
// any other flow returns cause with the flow's callbackURL.
func (s *Service) FailFlow(ctx context.Context, f Flow, cause error) (Finish, error) {
	return s.failed(ctx, f, Finish{CallbackURL: f.CallbackURL}, cause)
}

// publicReason names a failure for a test result without its details.
func publicReason(err error) string {
	for _, known := range []error{ErrIDTokenInvalid, ErrEmailUnverified, ErrEmailDomain, ErrTooManyGroups, ErrIdPError, ErrStateExpired,
		ErrStateInvalid, ErrAccountDisabled, ErrAccountNotLinkable, ErrUnknownProvider} {
		if errors.Is(err, known) {
			return known.Error()
		}
	}
	return "sign-in failed"
}

// CompleteSignIn ends a federated sign-in from what the provider asserted,
// in one transaction: it finds the account by the external identity or
// links one by verified e-mail (creating it when there is none), adds an
// organization provider's member just in time with the provider's default
// role, makes their teams follow the asserted groups (never the owners
// team; no group attribute, no change), starts the session and returns the
// one-time code for the dashboard. A dry run (KindTest) instead records
// what would have happened and changes nothing else.
func (s *Service) CompleteSignIn(ctx context.Context, f Flow, ident Identity) (Finish, error) {
	back := Finish{CallbackURL: f.CallbackURL}
	if f.Kind == KindTest {
		return s.completeTest(ctx, f, ident)
	}
	var row *providerRow
	if f.Kind == KindSSO {
		r, err := providerByID(ctx, s.db, f.Provider)
		if err != nil {
			return back, err
		}
		row = &r
	}
	email, err := checkAssertion(ident, row)
	if err != nil {
		return back, err
	}
	code, err := randomToken(32)
	if err != nil {
		return back, err
	}
	codeHash := s.keyedHash("code", code)
	now := s.stamp()
	err = db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var organizationID *string
		if row != nil {
			organizationID = &row.OrganizationID
		}
		user, err := s.account(ctx, tx, f.providerKey(), organizationID, ident, email, now)
		if err != nil {
			return err
		}
		var active *string
		if row == nil {
			// The instance IdP is not an organization's SSO: who must sign
			// in through theirs is refused here as a password is.
			if required, err := identity.SSORequiredFor(ctx, tx, user.ID); err != nil || required {
				return cmp.Or(err, identity.ErrSSORequired)
			}
		} else {
			if err := s.joinAndSync(ctx, tx, *row, user, ident); err != nil {
				return err
			}
			active = &row.OrganizationID
		}
		sess, token, err := s.identity.StartFederatedSession(ctx, tx, user.ID, active)
		if err != nil {
			return err
		}
		sealed, err := s.opts.Sealer.Seal([]byte(token), codeHash)
		if err != nil {
			return fmt.Errorf("sealing the session token: %w", err)
		}
		return insertCode(ctx, tx, codeHash, user.ID, sess.ID, sealed, f.BindingHash, now)
	})
	if err != nil {
		return back, err
	}
	back.SignInCode = code
	return back, nil
}

// checkAssertion refuses an identity without a subject or a verified
// address, and, for an organization provider, an address outside its
// domains: an organization can vouch only for the domains it registered,
// so its provider cannot take over another domain's accounts.
func checkAssertion(ident Identity, row *providerRow) (string, error) {
	if ident.Subject == "" {
		return "", fmt.Errorf("no subject: %w", ErrIDTokenInvalid)
	}
	email, err := identity.NormalizeEmail(ident.Email)
	if err != nil || !ident.EmailVerified {
		return "", ErrEmailUnverified
	}
	if row != nil && !slices.Contains(row.DomainsRaw, EmailDomain(email)) {
		return "", ErrEmailDomain
	}
	if len(ident.Groups) > maxGroups {
		return "", ErrTooManyGroups
	}
	return email, nil
}

// account finds the user of an external identity, or links the account
// of the verified address when that provider may (accountLinkable), or
// creates one. organizationID is an organization provider's, nil for the
// instance IdP.
func (s *Service) account(ctx context.Context, tx *sqlx.Tx, providerKey string, organizationID *string, ident Identity, email string, now time.Time) (identity.User, error) {
	var acct identity.FederatedAccount
	userID, err := externalUser(ctx, tx, providerKey, ident.Subject)
	switch {
	case err == nil:
		acct, err = identity.AccountByID(ctx, tx, userID)
	case errors.Is(err, fault.ErrNotFound):
		acct, err = identity.AccountByEmail(ctx, tx, email)
		switch {
		case errors.Is(err, fault.ErrNotFound):
			name := ident.Name
			if name == "" {
				name = email
			}
			acct.User, err = identity.CreateFederatedUser(ctx, tx, email, name, now)
		case err == nil:
			err = accountLinkable(ctx, tx, acct.ID, organizationID)
		}
	}
	if err != nil {
		return identity.User{}, err
	}
	if acct.Banned {
		return identity.User{}, ErrAccountDisabled
	}
	return acct.User, linkExternal(ctx, tx, providerKey, ident.Subject, acct.ID, now)
}

// joinAndSync adds the member just in time and syncs their teams.
func (s *Service) joinAndSync(ctx context.Context, tx *sqlx.Tx, row providerRow, user identity.User, ident Identity) error {
	actor := audit.Actor{Type: audit.ActorUser, ID: user.ID}
	joined, err := identity.JoinBySSO(ctx, tx, row.OrganizationID, user.ID, row.DefaultRole)
	if err != nil {
		return err
	}
	if joined {
		if _, err := audit.Append(ctx, tx, audit.Entry{OrganizationID: row.OrganizationID, Action: "member.joined_by_sso",
			Actor: actor, TargetType: "user", TargetID: user.ID,
			Evidence: map[string]any{"provider_id": row.ID, "role": string(row.DefaultRole)}}); err != nil {
			return err
		}
	}
	if !ident.GroupsAsserted {
		return nil
	}
	added, left, err := team.SyncSSOTeams(ctx, tx, row.OrganizationID, user.ID, ident.Groups)
	if err != nil || len(added)+len(left) == 0 {
		return err
	}
	_, err = audit.Append(ctx, tx, audit.Entry{OrganizationID: row.OrganizationID, Action: "member.teams_synced_by_sso",
		Actor: actor, TargetType: "user", TargetID: user.ID,
		Evidence: map[string]any{"provider_id": row.ID, "joined": added, "left": left}})
	return err
}

func (s *Service) completeTest(ctx context.Context, f Flow, ident Identity) (Finish, error) {
	back := Finish{CallbackURL: f.CallbackURL}
	row, err := providerByID(ctx, s.db, f.Provider)
	if err != nil {
		return back, err
	}
	result := TestResult{Email: ident.Email, EmailVerified: ident.EmailVerified, Groups: ident.Groups[:min(len(ident.Groups), maxGroups)]}
	if _, err := checkAssertion(ident, &row); err != nil {
		result.Error = publicReason(err)
	}
	if ident.GroupsAsserted {
		teams, err := team.SSOTeamsFor(ctx, s.db, row.OrganizationID, "")
		if err != nil {
			return back, err
		}
		for _, t := range teams {
			if t.Mapped(result.Groups) {
				result.Teams = append(result.Teams, t.Name)
			}
		}
	}
	return s.recordTest(ctx, f, result)
}

func (s *Service) recordTest(ctx context.Context, f Flow, r TestResult) (Finish, error) {
	r.ID = id.New("ssot")
	if err := insertTestResult(ctx, s.db, f.Provider, *f.OrganizationID, *f.InitiatedBy, r, s.stamp()); err != nil {
		return Finish{CallbackURL: f.CallbackURL}, err
	}
	return Finish{CallbackURL: f.CallbackURL, TestID: r.ID}, nil
}

// RedeemCode exchanges a one-time sign-in code for its session. The code
// is spent by its first redemption: an unknown, expired or used code, or
// one presented without the secret whose hash started its flow, is
// ErrCodeInvalid.
func (s *Service) RedeemCode(ctx context.Context, code, bindingSecret string) (identity.SignedIn, error) {
	if code == "" || bindingSecret == "" || s.opts.Sealer == nil {
		return identity.SignedIn{}, ErrCodeInvalid
	}
	codeHash := s.keyedHash("code", code)
	var row codeRow
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var err error
		row, err = consumeCode(ctx, tx, codeHash, s.stamp())
		return err
	})
	if err != nil {
		return identity.SignedIn{}, err
	}
	binding := sha256.Sum256([]byte(bindingSecret))
	if row.ConsumedAt != nil || !s.now().Before(row.ExpiresAt) || row.TokenSealed == nil ||
		subtle.ConstantTimeCompare(binding[:], row.BindingHash) != 1 {
		return identity.SignedIn{}, ErrCodeInvalid
	}
	token, err := s.opts.Sealer.Open(row.TokenSealed, codeHash)
	if err != nil {
		return identity.SignedIn{}, fmt.Errorf("opening the session token: %w", err)
	}
	sess, err := identity.SessionByID(ctx, s.db, row.SessionID)
	if err != nil {
		return identity.SignedIn{}, err
	}
	acct, err := identity.AccountByID(ctx, s.db, row.UserID)
	if err != nil {
		return identity.SignedIn{}, err
	}
	return identity.SignedIn{User: acct.User, Session: sess, Token: string(token)}, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
