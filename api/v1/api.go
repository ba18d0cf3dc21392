package v1

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humafiber"
	"github.com/gofiber/fiber/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/assembly/domain"
	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/platform/cursor"
	"github.com/cairnhq/cairn/api/platform/httpx"
	"github.com/cairnhq/cairn/api/platform/idempotency"
	"github.com/cairnhq/cairn/api/platform/jsondoc"
	"github.com/cairnhq/cairn/api/platform/reqid"
	"github.com/cairnhq/cairn/api/platform/seal"
	"github.com/cairnhq/cairn/api/platform/secret"
	"github.com/cairnhq/cairn/api/run"
)

const (
	// JSONBodyLimit bounds ordinary JSON control documents (SPEC §8).
	JSONBodyLimit = 65536
	// SessionCookie is the API's session cookie.
	SessionCookie = "__Secure-identity.session_token"

	metaPublic    = "cairn.public"
	metaBodyLimit = "cairn.body_limit"
	// metaNULProblem is the problem an operation answers a body with a
	// NUL character with, when it has a code of its own for it.
	metaNULProblem = "cairn.nul_problem"
	// metaRefusedFields maps the validation location of a body field the
	// operation refuses whatever its value (body.auto_apply) to the
	// problem that names it.
	metaRefusedFields = "cairn.refused_fields"
	metaMutation      = "cairn.mutation"
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
	// Agents resolves agent access tokens; nil refuses every bearer.
	Agents AgentAuthenticator
	// Services are the domain services assembly.Assemble built.
	Services domain.Services
}

// API is the mounted /v1 surface.
type API struct {
	huma    huma.API
	deps    Deps
	ledger  *idempotency.Ledger
	cursors cursor.Codec
	ready   bool
	// holds bounds the mutations that keep their key on a connection of
	// its own while they commit in steps (each uses at most two
	// connections at once), so they can never take the whole pool.
	holds chan struct{}

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
		huma.NewErrorWithContext = func(ctx huma.Context, status int, msg string, errs ...error) huma.StatusError {
			if p, ok := nulProblem(ctx, errs); ok {
				return httpx.NewErrorBody(p)
			}
			if p, ok := refusedFieldProblem(ctx, errs); ok {
				return httpx.NewErrorBody(p)
			}
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
		agentScheme: {Type: "http", Scheme: "bearer", BearerFormat: "JWT",
			Description: "An agent's OAuth access token from the authorization server at /api/auth (audience {mcp_url}/mcp). " +
				"Accepted only on the operations listed in " + AgentOperationsExtension + "; mutations need mcp:write."},
	}
	agentOps := make([]string, 0, len(AgentOperations))
	for name := range AgentOperations {
		agentOps = append(agentOps, name)
	}
	slices.Sort(agentOps)
	cfg.Info.Extensions = map[string]any{AgentOperationsExtension: agentOps}
	cfg.Transformers = []huma.Transformer{stampRequestID}
	cfg.Formats = map[string]huma.Format{"application/json": jsonFormat, "json": jsonFormat}

	a := &API{
		huma:  humafiber.NewV2(app, cfg),
		deps:  deps,
		holds: make(chan struct{}, max(1, deps.Config.DBMaxConns/4)),
	}
	if deps.Config.AuthReady() {
		// Stored answers are sealed under a key of their own derived from
		// AUTH_SECRET, which /v1 cannot run without; the master key stays
		// optional for deployments without sensitive values.
		sealer, err := seal.NewSealer(secret.Derive(deps.Config.AuthSecret, "idempotency-response"))
		if err != nil {
			panic(err) // a derived key always has the right length
		}
		a.ledger = idempotency.NewLedger(secret.Derive(deps.Config.AuthSecret, "idempotency-fingerprint"), sealer)
		a.cursors = cursor.NewCodec(secret.Derive(deps.Config.AuthSecret, "list-cursor"))
	}
	a.ready = deps.DB != nil && deps.Sessions != nil && deps.Config.AuthReady()
	a.huma.UseMiddleware(a.limitBody, a.authenticate, a.checkQuery, a.requireIdempotencyKey, a.admit)
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

// route is what identifies the current operation's target: method, path
// template, the resolved path (the resource IDs the handler acts on) and
// the canonical query. All of it is part of every idempotency
// fingerprint, so one key never stands for two resources.
type route struct{ method, template, path, query, rawQuery, contentType string }

// routeOf resolves the operation's path template with the path parameters
// exactly as the handler receives them, and canonicalizes the query
// (parameters sorted by name, each name's values in the order sent).
func routeOf(ctx huma.Context) route {
	op := ctx.Operation()
	path := op.Path
	for _, p := range op.Parameters {
		if p.In == "path" {
			path = strings.ReplaceAll(path, "{"+p.Name+"}", url.PathEscape(ctx.Param(p.Name)))
		}
	}
	query := url.Values{}
	humafiber.UnwrapV2(ctx).Request().URI().QueryArgs().VisitAll(func(k, v []byte) {
		query.Add(string(k), string(v))
	})
	req := humafiber.UnwrapV2(ctx).Request()
	return route{method: op.Method, template: op.Path, path: path, query: query.Encode(),
		rawQuery: string(req.URI().QueryString()), contentType: string(req.Header.ContentType())}
}

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
	ctx = huma.WithValue(ctx, routeKey{}, routeOf(ctx))
	if op.RequestBody != nil {
		// Streaming operations (archive uploads) read the body themselves,
		// through huma's limited reader.
		ctx = huma.WithValue(ctx, bodyStreamKey{}, ctx.BodyReader())
	}
	next(ctx)
}

// nulProblem is the operation's own problem for a body refused because it
// holds a NUL character (a generic secret's value), if it has one.
func nulProblem(ctx huma.Context, errs []error) (httpx.Problem, bool) {
	if ctx == nil || ctx.Operation() == nil {
		return httpx.Problem{}, false
	}
	p, ok := ctx.Operation().Metadata[metaNULProblem].(httpx.Problem)
	if !ok {
		return httpx.Problem{}, false
	}
	for _, err := range errs {
		// huma keeps only the text of the format's error.
		var detail *huma.ErrorDetail
		if errors.As(err, &detail) && detail.Location == "body" && detail.Message == jsondoc.ErrNUL.Error() {
			return p, true
		}
	}
	return httpx.Problem{}, false
}

// refusedFieldProblem is the operation's own problem for a body that
// carries a field it refuses whatever its value, if it carried one.
func refusedFieldProblem(ctx huma.Context, errs []error) (httpx.Problem, bool) {
	if ctx == nil || ctx.Operation() == nil {
		return httpx.Problem{}, false
	}
	refused, _ := ctx.Operation().Metadata[metaRefusedFields].(map[string]httpx.Problem)
	for _, err := range errs {
		var detail *huma.ErrorDetail
		if errors.As(err, &detail) {
			if p, ok := refused[detail.Location]; ok {
				return p, true
			}
		}
	}
	return httpx.Problem{}, false
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
		a.authenticateBearer(ctx, authz, next)
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

// requireIdempotencyKey refuses a mutation without a well-formed key before
// its body is parsed or any handler runs: every state-changing operation
// registered through register gets this check, so none can forget it.
func (a *API) requireIdempotencyKey(ctx huma.Context, next func(huma.Context)) {
	if mutating, _ := ctx.Operation().Metadata[metaMutation].(bool); mutating {
		if err := idempotency.ValidateKey(ctx.Header(idempotency.Header)); err != nil {
			a.writeProblem(ctx, a.problemFor(ctx.Context(), err))
			return
		}
	}
	next(ctx)
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
	// The problem itself, not one rebuilt from its status: a status alone
	// loses codes such as the admission 503's service_unavailable.
	v, err := a.huma.Transform(ctx, strconv.Itoa(p.Status), body)
	if err == nil {
		_ = a.huma.Marshal(ctx.BodyWriter(), "application/json", v)
	}
}

// operationOptions are Cairn's per-operation settings, kept in huma metadata.
type operationOptions struct {
	public   bool
	mutation bool
	// restrictedDownload marks a POST that releases raw bytes: a form body
	// of at most 4 KiB, no idempotency key, no query string.
	restrictedDownload bool
	bodyLimit          int64
	// nulProblem, when set, answers a body with a NUL character instead
	// of the generic validation failure.
	nulProblem *httpx.Problem
	// refusedFields names body fields refused whatever their value
	// (their schema admits none) and the error each is refused with.
	refusedFields map[string]error
	// admit is how launch control admits a mutation; every mutation
	// names one.
	admit admission
	// signedDelivery is a public POST authenticated by its own signature
	// (the code-host webhook): it takes no Idempotency-Key, because the
	// provider's delivery ID is its replay identity.
	signedDelivery bool
}

// isMutation reports whether an operation changes state: every method but
// the safe ones does, and each such operation requires an Idempotency-Key.
func isMutation(method string) bool {
	switch strings.ToUpper(method) {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// register adds an operation with Cairn's conventions: session security
// unless public, a JSON body limit, and for every state-changing method a
// required Idempotency-Key header, documented and checked before the
// handler runs.
func register[I, O any](a *API, op huma.Operation, o operationOptions, handler func(context.Context, *I) (*O, error)) {
	if op.Metadata == nil {
		op.Metadata = map[string]any{}
	}
	limit := o.bodyLimit
	if limit == 0 {
		limit = JSONBodyLimit
	}
	// Every state-changing method is a mutation and needs a key, and no
	// safe one is: an operation that says otherwise never starts. The one
	// exception is a restricted download, a POST that changes nothing but
	// the audit log and takes no key (SPEC §4 rule 3).
	mutating := isMutation(op.Method)
	if o.signedDelivery {
		if !o.public || o.mutation || op.Method != http.MethodPost {
			panic("v1: signed delivery " + op.OperationID + " must be a public POST registered without mutation")
		}
		mutating = false
	}
	if o.restrictedDownload {
		if op.Method != http.MethodPost || o.mutation {
			panic("v1: restricted download " + op.OperationID + " must be a POST registered without mutation")
		}
		mutating = false
		limit = run.MaxDownloadFormBytes
	}
	if o.mutation != mutating {
		panic("v1: " + op.OperationID + ": " + op.Method + " must be registered with mutation " + strconv.FormatBool(mutating))
	}
	if o.mutation && o.admit == admitUnset {
		panic("v1: mutation " + op.OperationID + " names no launch admission")
	}
	op.Metadata[metaPublic] = o.public
	op.Metadata[metaBodyLimit] = limit
	op.Metadata[metaMutation] = mutating
	op.Metadata[metaAdmission] = o.admit
	agent := agentAccessOf(op, mutating)
	if o.public && agent != agentNone {
		panic("v1: public operation " + op.OperationID + " cannot be an agent operation")
	}
	op.Metadata[metaAgent] = agent
	if o.nulProblem != nil {
		op.Metadata[metaNULProblem] = *o.nulProblem
	}
	if len(o.refusedFields) > 0 {
		refused := make(map[string]httpx.Problem, len(o.refusedFields))
		for field, err := range o.refusedFields {
			refused["body."+field] = a.problemFor(context.Background(), err)
		}
		op.Metadata[metaRefusedFields] = refused
	}
	// huma rejects a body whose length reaches MaxBodyBytes, so one more
	// byte lets a body of exactly the limit through.
	op.MaxBodyBytes = limit + 1
	if !o.public {
		op.Security = []map[string][]string{{"session": {}}}
		switch agent {
		case agentRead:
			op.Security = append(op.Security, map[string][]string{agentScheme: {"mcp:tools"}})
		case agentWrite:
			op.Security = append(op.Security, map[string][]string{agentScheme: {"mcp:tools", "mcp:write"}})
		}
	}
	if op.DefaultStatus == 0 {
		op.DefaultStatus = http.StatusOK
	}
	huma.Register(a.huma, op, handler)
	if mutating && !markIdempotencyKeyRequired(a.huma.OpenAPI().Paths[op.Path], op.Method) {
		panic("v1: mutation " + op.OperationID + " has no Idempotency-Key header in its input (embed IdempotencyHeader)")
	}
}

// markIdempotencyKeyRequired documents the operation's Idempotency-Key
// header as required, reporting whether the operation has one.
func markIdempotencyKeyRequired(item *huma.PathItem, method string) bool {
	if item == nil {
		return false
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
		return false
	}
	found := false
	for _, p := range op.Parameters {
		if p.In == "header" && p.Name == idempotency.Header {
			p.Required, found = true, true
		}
	}
	return found
}

// discard reads and drops at most max bytes of r, reporting how many it read.
func discard(r io.Reader, max int64) (int64, error) {
	return io.Copy(io.Discard, io.LimitReader(r, max))
}
