package v1

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humafiber"
	"github.com/gofiber/fiber/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/platform/cursor"
	"github.com/cairnhq/cairn/api/platform/httpx"
	"github.com/cairnhq/cairn/api/platform/idempotency"
	"github.com/cairnhq/cairn/api/platform/jsondoc"
	"github.com/cairnhq/cairn/api/platform/reqid"
	"github.com/cairnhq/cairn/api/platform/secret"
)

const (
	// JSONBodyLimit bounds ordinary JSON control documents (SPEC §8).
	JSONBodyLimit = 65536
	// SessionCookie is the API's session cookie.
	SessionCookie = "__Secure-identity.session_token"

	metaPublic    = "cairn.public"
	metaBodyLimit = "cairn.body_limit"
)

// Authenticator resolves a session token to a principal with a live
// membership in its active organization.
type Authenticator interface {
	AuthenticateSession(ctx context.Context, token string) (access.Principal, error)
}

// Deps is what the /v1 surface needs. DB and Sessions are nil when the
// database binding is absent; every protected operation then fails closed.
type Deps struct {
	Config   config.Config
	DB       *sqlx.DB
	Logger   *slog.Logger
	Sessions Authenticator
	Services Services
}

// API is the mounted /v1 surface.
type API struct {
	huma    huma.API
	deps    Deps
	ledger  *idempotency.Ledger
	cursors cursor.Codec
	ready   bool

	specOnce  sync.Once
	specBytes []byte
	specErr   error
}

var installErrorsOnce sync.Once

// installErrors points huma's error constructor at our bounded error object,
// so every framework-raised error (bad JSON, unknown field, oversize body)
// has the same shape and code vocabulary as our own.
func installErrors() {
	installErrorsOnce.Do(func() {
		huma.NewError = func(status int, _ string, _ ...error) huma.StatusError {
			return httpx.NewErrorBody(httpx.ProblemForStatus(status))
		}
		huma.NewErrorWithContext = func(_ huma.Context, status int, msg string, errs ...error) huma.StatusError {
			return huma.NewError(status, msg, errs...)
		}
	})
}

// Mount registers every /v1 operation on app.
func Mount(app *fiber.App, deps Deps) *API {
	installErrors()
	cfg := huma.DefaultConfig("Cairn API", "1.0.0")
	// No $schema links, no docs page (it loads a CDN script), no schema
	// routes, and our own spec route serving the committed-identical bytes.
	cfg.CreateHooks = nil
	cfg.DocsPath = ""
	cfg.SchemasPath = ""
	cfg.OpenAPIPath = ""
	cfg.Info.Description = "Cairn's native API. Every state-changing operation requires an Idempotency-Key header; " +
		"lists are cursor-backed and newest first."
	cfg.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		"session": {Type: "apiKey", In: "cookie", Name: SessionCookie},
	}
	cfg.Transformers = []huma.Transformer{stampRequestID}
	cfg.Formats = map[string]huma.Format{"application/json": jsonFormat, "json": jsonFormat}

	a := &API{
		huma: humafiber.NewV2(app, cfg),
		deps: deps,
	}
	if deps.Config.AuthReady() {
		a.ledger = idempotency.NewLedger(secret.Derive(deps.Config.AuthSecret, "idempotency-fingerprint"))
		a.cursors = cursor.NewCodec(secret.Derive(deps.Config.AuthSecret, "list-cursor"))
	}
	a.ready = deps.DB != nil && deps.Sessions != nil && deps.Config.AuthReady()
	a.huma.UseMiddleware(a.limitBody, a.authenticate, a.checkQuery)
	a.registerOperations()
	return a
}

// Huma exposes the underlying API, for tests that mount extra operations.
func (a *API) Huma() huma.API { return a.huma }

func stampRequestID(ctx huma.Context, _ string, v any) (any, error) {
	return httpx.Stamp(v, reqid.From(ctx.Context())), nil
}

type routeKey struct{}

// bodyStreamKey holds the request body reader of streaming operations.
type bodyStreamKey struct{}

// route is the method and path template of the current operation: part of
// every idempotency fingerprint.
type route struct{ method, path string }

func routeFrom(ctx context.Context) route {
	r, _ := ctx.Value(routeKey{}).(route)
	return r
}

// limitBody enforces an operation's body limit before a byte is read: a
// declared oversize length is answered 413 at once, an unknown-length body is
// cut off by huma's reader one byte past the limit, and a body sent to an
// operation that takes none is discarded within the same limit.
func (a *API) limitBody(ctx huma.Context, next func(huma.Context)) {
	op := ctx.Operation()
	limit, _ := op.Metadata[metaBodyLimit].(int64)
	if limit == 0 {
		limit = JSONBodyLimit
	}
	fc := humafiber.UnwrapV2(ctx)
	declared := int64(fc.Request().Header.ContentLength())
	if declared > limit {
		a.writeProblem(ctx, httpx.Problem{Status: http.StatusRequestEntityTooLarge, Code: httpx.CodePayloadTooLarge})
		return
	}
	if op.RequestBody == nil && declared != 0 {
		if stream := fc.Request().BodyStream(); stream != nil {
			n, err := discard(stream, limit+1)
			if err != nil || n > limit {
				a.writeProblem(ctx, httpx.Problem{Status: http.StatusRequestEntityTooLarge, Code: httpx.CodePayloadTooLarge})
				return
			}
		}
	}
	ctx = huma.WithValue(ctx, routeKey{}, route{method: op.Method, path: op.Path})
	if op.RequestBody != nil {
		// Streaming operations (archive uploads) read the body themselves,
		// through huma's limited reader.
		ctx = huma.WithValue(ctx, bodyStreamKey{}, ctx.BodyReader())
	}
	next(ctx)
}

// jsonFormat is huma's JSON format refusing NUL characters in request
// bodies, which no text column can store.
var jsonFormat = huma.Format{
	Marshal: huma.DefaultJSONFormat.Marshal,
	Unmarshal: func(data []byte, v any) error {
		if err := jsondoc.CheckText(data); err != nil {
			return err
		}
		return huma.DefaultJSONFormat.Unmarshal(data, v)
	},
}

// checkQuery refuses query strings that are not storable text before any
// operation passes them to a list filter.
func (a *API) checkQuery(ctx huma.Context, next func(huma.Context)) {
	if err := httpx.CheckQuery(humafiber.UnwrapV2(ctx)); err != nil {
		a.writeProblem(ctx, httpx.Problem{Status: http.StatusBadRequest, Code: httpx.CodeValidationFailed})
		return
	}
	next(ctx)
}

// authenticate resolves the session of every protected operation and fails
// closed without the database or AUTH_SECRET. Bearer credentials are never
// mixed with cookies: a request that sends one is judged on it alone.
func (a *API) authenticate(ctx huma.Context, next func(huma.Context)) {
	if public, _ := ctx.Operation().Metadata[metaPublic].(bool); public {
		next(ctx)
		return
	}
	if !a.ready {
		a.writeProblem(ctx, httpx.Problem{Status: http.StatusServiceUnavailable, Code: httpx.CodeUnavailable})
		return
	}
	if authz := ctx.Header("Authorization"); authz != "" {
		// Service-account (sst_) and run (rat_) tokens belong to /api/v2;
		// agent bearer tokens are not accepted here yet. Either way: 401.
		a.writeProblem(ctx, httpx.Problem{Status: http.StatusUnauthorized, Code: httpx.CodeUnauthenticated})
		return
	}
	token := humafiber.UnwrapV2(ctx).Cookies(SessionCookie)
	if token == "" {
		a.writeProblem(ctx, httpx.Problem{Status: http.StatusUnauthorized, Code: httpx.CodeUnauthenticated})
		return
	}
	principal, err := a.deps.Sessions.AuthenticateSession(ctx.Context(), token)
	if err != nil {
		a.writeProblem(ctx, a.problemFor(ctx.Context(), err))
		return
	}
	next(huma.WithContext(ctx, access.WithPrincipal(ctx.Context(), principal)))
}

func (a *API) writeProblem(ctx huma.Context, p httpx.Problem) {
	body := httpx.NewErrorBody(p)
	for k, values := range body.GetHeaders() {
		for _, v := range values {
			ctx.SetHeader(k, v)
		}
	}
	ctx.SetHeader("Content-Type", "application/json")
	ctx.SetStatus(p.Status)
	_ = huma.WriteErr(a.huma, ctx, p.Status, "")
}

// operationOptions are Cairn's per-operation settings, kept in huma metadata.
type operationOptions struct {
	public    bool
	mutation  bool
	bodyLimit int64
}

// register adds an operation with Cairn's conventions: session security
// unless public, a JSON body limit, and for mutations a documented required
// Idempotency-Key header.
func register[I, O any](a *API, op huma.Operation, o operationOptions, handler func(context.Context, *I) (*O, error)) {
	if op.Metadata == nil {
		op.Metadata = map[string]any{}
	}
	limit := o.bodyLimit
	if limit == 0 {
		limit = JSONBodyLimit
	}
	op.Metadata[metaPublic] = o.public
	op.Metadata[metaBodyLimit] = limit
	// huma rejects a body whose length reaches MaxBodyBytes, so one more
	// byte lets a body of exactly the limit through.
	op.MaxBodyBytes = limit + 1
	if !o.public {
		op.Security = []map[string][]string{{"session": {}}}
	}
	if op.DefaultStatus == 0 {
		op.DefaultStatus = http.StatusOK
	}
	huma.Register(a.huma, op, handler)
	if o.mutation {
		markIdempotencyKeyRequired(a.huma.OpenAPI().Paths[op.Path], op.Method)
	}
}

func markIdempotencyKeyRequired(item *huma.PathItem, method string) {
	if item == nil {
		return
	}
	var op *huma.Operation
	switch strings.ToUpper(method) {
	case http.MethodPost:
		op = item.Post
	case http.MethodPut:
		op = item.Put
	case http.MethodPatch:
		op = item.Patch
	case http.MethodDelete:
		op = item.Delete
	}
	if op == nil {
		return
	}
	for _, p := range op.Parameters {
		if p.In == "header" && p.Name == idempotency.Header {
			p.Required = true
		}
	}
}

// discard reads and drops at most max bytes of r, reporting how many it read.
func discard(r io.Reader, max int64) (int64, error) {
	return io.Copy(io.Discard, io.LimitReader(r, max))
}
