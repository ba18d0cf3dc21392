package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/oauth"
	"github.com/cairnhq/cairn/api/platform/buildinfo"
	"github.com/cairnhq/cairn/api/platform/failure"
)

// Paths served under {mcp_url}.
const (
	EndpointPath = "/mcp"
	MetadataPath = "/.well-known/oauth-protected-resource"
)

// clockSkew is the leeway on token times between this host and the API.
const clockSkew = 30 * time.Second

// Options configure the endpoint.
type Options struct {
	// APIURL is where /v1 and the JWKS are reached; Issuer is the
	// authorization server's issuer (CAIRN_PUBLIC_URL for both by default).
	APIURL string
	Issuer string
	// MCPURL is the endpoint's own public origin ({mcp_url}); its /mcp is
	// the resource every accepted token must name as its one audience.
	MCPURL string
	// Client reaches the API (nil: a client with a 60 s timeout).
	Client *http.Client
	Logger *slog.Logger
}

// Server is the agent tool endpoint.
type Server struct {
	opts     Options
	resource string
	keys     *keySet
	api      *apiClient
}

// New returns the endpoint.
func New(opts Options) *Server {
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: 60 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	apiURL := strings.TrimRight(opts.APIURL, "/")
	return &Server{
		opts:     opts,
		resource: strings.TrimRight(opts.MCPURL, "/") + EndpointPath,
		keys:     &keySet{url: apiURL + "/api/auth/jwks", client: opts.Client},
		api:      &apiClient{base: apiURL, client: opts.Client, logger: opts.Logger},
	}
}

// Resource is the endpoint's resource identifier, {mcp_url}/mcp.
func (s *Server) Resource() string { return s.resource }

// MetadataURL is where the protected resource metadata is served.
func (s *Server) MetadataURL() string {
	return strings.TrimRight(s.opts.MCPURL, "/") + MetadataPath
}

// Handler serves /health, the protected resource metadata (at the
// well-known path and its /mcp-suffixed form, RFC 9728 §3.1) and the MCP
// endpoint, which refuses every request without a valid token with 401
// and a challenge naming the metadata.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok","version":"` + buildinfo.Version + `"}`))
	})
	meta := auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               s.resource,
		AuthorizationServers:   []string{s.opts.Issuer},
		ScopesSupported:        oauth.Scopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "Cairn agent tools",
	})
	mux.Handle(MetadataPath, meta)
	mux.Handle(MetadataPath+EndpointPath, meta)

	server := sdk.NewServer(&sdk.Implementation{Name: "cairn", Title: "Cairn", Version: buildinfo.Version}, &sdk.ServerOptions{
		Instructions: "Cairn runs OpenTofu changes: find a workspace, upload a configuration, start a plan_only or " +
			"plan_and_apply run, then read its plan changes, logs and policy result. Approving is a person's " +
			"decision in the Cairn dashboard; agents propose, people approve.",
		Logger: s.opts.Logger,
	})
	s.addTools(server)
	streamable := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, &sdk.StreamableHTTPOptions{
		// Every request carries its own token and is re-authenticated by
		// /v1; no session state is kept between requests, so replicas need
		// no affinity.
		Stateless:    true,
		JSONResponse: true,
		Logger:       s.opts.Logger,
	})
	// The 401 challenge names no scope, so clients ask for what the
	// metadata lists (mcp:tools and mcp:write) and the person decides at
	// consent; a token without mcp:tools is then refused with 403.
	mux.Handle(EndpointPath, auth.RequireBearerToken(s.verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: s.MetadataURL(),
		ClockSkew:           clockSkew,
	})(s.requireScope(streamable)))
	return failure.Recover(s.opts.Logger, mux)
}

// requireScope refuses a verified token without mcp:tools (RFC 6750
// §3.1 insufficient_scope).
func (s *Server) requireScope(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := auth.TokenInfoFromContext(r.Context())
		if info == nil || !slices.Contains(info.Scopes, access.ScopeMCPTools) {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope=%q, resource_metadata=%q`,
				access.ScopeMCPTools, s.MetadataURL()))
			http.Error(w, "insufficient scope", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// tokenKey holds the caller's raw token for the tools to forward.
const tokenKey = "cairn.token"

// verify checks a token the way /v1 does, with the API's published keys:
// signature, type, issuer, the one audience {mcp_url}/mcp and times.
func (s *Server) verify(ctx context.Context, raw string, _ *http.Request) (*auth.TokenInfo, error) {
	parsed, err := jose.ParseSigned(raw, []jose.SignatureAlgorithm{oauth.SigningAlgorithm})
	if err != nil || len(parsed.Signatures) != 1 {
		return nil, auth.ErrInvalidToken
	}
	keys := s.keys.get(ctx, parsed.Signatures[0].Header.KeyID)
	claims, err := oauth.VerifyAccessToken(raw, keys, s.opts.Issuer, s.resource, time.Now(), clockSkew)
	if err != nil {
		return nil, errors.Join(auth.ErrInvalidToken, err)
	}
	return &auth.TokenInfo{
		Scopes:     claims.Scopes(),
		Expiration: claims.Expiry.Time(),
		UserID:     claims.Subject + "/" + claims.OrganizationID + "/" + claims.ClientID,
		Extra:      map[string]any{tokenKey: raw},
	}, nil
}
