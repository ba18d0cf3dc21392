package sso

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// minClientSecretBytes is the shortest client secret accepted: a shorter
// one closes the sign-in (503) rather than running on a guessable secret.
const minClientSecretBytes = 16

// GitHub's OAuth2 endpoints and API: GitHub is not an OIDC provider, so
// its sign-in reads the user and their verified primary e-mail from the API.
const (
	gitHubAuthURL  = "https://github.com/login/oauth/authorize"
	gitHubTokenURL = "https://github.com/login/oauth/access_token"
	gitHubAPI      = "https://api.github.com"
	googleIssuer   = "https://accounts.google.com"
)

// InstanceIdP is the instance-wide identity provider (IDP_CLIENT_ID,
// IDP_CLIENT_SECRET, CAIRN_IDP_ISSUER, CAIRN_IDP_NAME). google and github
// work by name alone; any other name needs an OIDC issuer with discovery.
type InstanceIdP struct {
	Name         string
	ClientID     string
	ClientSecret string
	Issuer       string
	// GitHubURLs replaces GitHub's endpoints (tests); zero uses GitHub's.
	GitHubURLs GitHubURLs
}

// GitHubURLs are the endpoints a github sign-in uses.
type GitHubURLs struct {
	AuthURL, TokenURL, API string
}

// Ready reports whether the instance IdP can run: a name, a client ID, a
// strong secret and, except for github, an issuer.
func (i InstanceIdP) Ready() bool {
	return i.Name != "" && i.ClientID != "" && len(i.ClientSecret) >= minClientSecretBytes &&
		(i.Name == "github" || i.issuer() != "")
}

func (i InstanceIdP) issuer() string {
	if i.Issuer == "" && i.Name == "google" {
		return googleIssuer
	}
	return i.Issuer
}

// DisplayName is what the sign-in button says.
func (i InstanceIdP) DisplayName() string {
	switch i.Name {
	case "google":
		return "Google"
	case "github":
		return "GitHub"
	case "oidc":
		if i.Issuer != "" {
			return "Single sign-on"
		}
	}
	return i.Name
}

// relyingParty is Cairn as the client of one identity provider.
type relyingParty struct {
	config   oauth2.Config
	provider *oidc.Provider // nil for GitHub
	verifier *oidc.IDTokenVerifier
	mapping  Mapping
	github   string // GitHub's API base, for a github sign-in
	client   *http.Client
}

// newOIDCRelyingParty discovers an issuer. Discovery and the key set it
// yields outlive the request, so they run on the client's own context.
func newOIDCRelyingParty(client *http.Client, issuer, clientID, clientSecret, redirectURL string, scopes []string, mapping Mapping) (*relyingParty, error) {
	ctx := oidc.ClientContext(context.Background(), client)
	p, err := oidc.NewProvider(ctx, issuer)
	if err != nil {
		return nil, fmt.Errorf("discovering %s: %w: %w", issuer, ErrIdPError, err)
	}
	return &relyingParty{
		config: oauth2.Config{ClientID: clientID, ClientSecret: clientSecret, Endpoint: p.Endpoint(),
			RedirectURL: redirectURL, Scopes: scopes},
		provider: p,
		verifier: p.Verifier(&oidc.Config{ClientID: clientID}),
		mapping:  mapping,
		client:   client,
	}, nil
}

func newGitHubRelyingParty(client *http.Client, urls GitHubURLs, clientID, clientSecret, redirectURL string) *relyingParty {
	if urls.AuthURL == "" {
		urls = GitHubURLs{AuthURL: gitHubAuthURL, TokenURL: gitHubTokenURL, API: gitHubAPI}
	}
	return &relyingParty{
		config: oauth2.Config{ClientID: clientID, ClientSecret: clientSecret, RedirectURL: redirectURL,
			Endpoint: oauth2.Endpoint{AuthURL: urls.AuthURL, TokenURL: urls.TokenURL, AuthStyle: oauth2.AuthStyleInParams},
			Scopes:   []string{"read:user", "user:email"}},
		github: strings.TrimRight(urls.API, "/"),
		client: client,
	}
}

// authorizationURL sends the browser to the provider with the flow's
// state, nonce and PKCE S256 challenge.
func (rp *relyingParty) authorizationURL(state, nonce, verifier string) string {
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier)}
	if rp.provider != nil {
		opts = append(opts, oidc.Nonce(nonce))
	}
	return rp.config.AuthCodeURL(state, opts...)
}

// identity exchanges the code (with the PKCE verifier) and reads who
// signed in: from the verified ID token (signature, issuer, audience,
// expiry, then the flow's nonce), or from GitHub's API.
func (rp *relyingParty) identity(ctx context.Context, code, verifier, nonce string) (Identity, error) {
	ctx = oidc.ClientContext(ctx, rp.client)
	tok, err := rp.config.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		return Identity{}, fmt.Errorf("exchanging the code: %w: %w", ErrIdPError, err)
	}
	if rp.github != "" {
		return rp.gitHubIdentity(ctx, tok)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return Identity{}, fmt.Errorf("no ID token in the token response: %w", ErrIDTokenInvalid)
	}
	idt, err := rp.verifier.Verify(ctx, raw)
	if err != nil {
		return Identity{}, fmt.Errorf("verifying the ID token: %w: %w", ErrIDTokenInvalid, err)
	}
	if nonce == "" || idt.Nonce != nonce {
		return Identity{}, fmt.Errorf("ID token nonce: %w", ErrIDTokenInvalid)
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return Identity{}, fmt.Errorf("reading ID token claims: %w: %w", ErrIDTokenInvalid, err)
	}
	groups, asserted := claimValues(claims[rp.mapping.Groups])
	if !asserted {
		// Providers that keep groups out of the ID token (size limits)
		// serve them from userinfo.
		if info, err := rp.provider.UserInfo(ctx, oauth2.StaticTokenSource(tok)); err == nil && info.Subject == idt.Subject {
			var extra map[string]any
			if info.Claims(&extra) == nil {
				groups, asserted = claimValues(extra[rp.mapping.Groups])
			}
		}
	}
	email, _ := claims[rp.mapping.Email].(string)
	name, _ := claims[rp.mapping.Name].(string)
	if name == "" {
		name, _ = claims["preferred_username"].(string)
	}
	return Identity{
		Subject:        idt.Subject,
		Email:          email,
		EmailVerified:  claimTrue(claims["email_verified"]),
		Name:           name,
		Groups:         SplitGroups(groups),
		GroupsAsserted: asserted,
	}, nil
}

// claimValues reads a claim that is a string or a list of strings.
func claimValues(v any) ([]string, bool) {
	switch v := v.(type) {
	case string:
		return []string{v}, true
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out, true
	}
	return nil, false
}

// claimTrue reads email_verified, which some providers send as a string.
func claimTrue(v any) bool {
	switch v := v.(type) {
	case bool:
		return v
	case string:
		return v == "true"
	}
	return false
}

// gitHubIdentity reads the GitHub user and their primary e-mail, which
// counts only when GitHub has verified it.
func (rp *relyingParty) gitHubIdentity(ctx context.Context, tok *oauth2.Token) (Identity, error) {
	client := rp.config.Client(ctx, tok)
	var user struct {
		ID    int64  `json:"id"`
		Login string `json:"login"`
		Name  string `json:"name"`
	}
	if err := getJSON(ctx, client, rp.github+"/user", &user); err != nil || user.ID == 0 {
		return Identity{}, fmt.Errorf("reading the GitHub user: %w: %w", ErrIdPError, err)
	}
	var emails []struct {
		Email    string `json:"email"`
		Primary  bool   `json:"primary"`
		Verified bool   `json:"verified"`
	}
	if err := getJSON(ctx, client, rp.github+"/user/emails", &emails); err != nil {
		return Identity{}, fmt.Errorf("reading the GitHub user's e-mails: %w: %w", ErrIdPError, err)
	}
	id := Identity{Subject: strconv.FormatInt(user.ID, 10), Name: user.Name}
	if id.Name == "" {
		id.Name = user.Login
	}
	for _, e := range emails {
		if e.Primary {
			id.Email, id.EmailVerified = e.Email, e.Verified
		}
	}
	return id, nil
}

func getJSON(ctx context.Context, client *http.Client, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
	}
	return json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 1<<20)).Decode(v)
}
