package telemetry

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Spans lists the span names that may be exported, like Events: a new span
// is a reviewed change.
var Spans = []string{
	"http_request",
	"river_job",
	"sandbox_phase",
}

// Processes are the service names a trace may carry.
var Processes = []string{"cairn_api", "cairn_worker"}

// Tracing exports spans over OTLP/HTTP when an endpoint is configured and
// does nothing otherwise. Spans take their attributes only as Values, which
// pass the same boundary as events: a span cannot carry a repository name,
// an address or a secret, because there is no way to give it one.
type Tracing struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
}

// StartTracing exports to endpoint (the standard
// OTEL_EXPORTER_OTLP_ENDPOINT: a base URL, traces go to /v1/traces); an
// empty endpoint gives a Tracing whose spans are never recorded.
func StartTracing(ctx context.Context, endpoint, process string) (*Tracing, error) {
	if endpoint == "" {
		return &Tracing{tracer: noop.NewTracerProvider().Tracer("cairn")}, nil
	}
	if !slices.Contains(Processes, process) {
		return nil, fmt.Errorf("%w: process name is not registered", ErrRejected)
	}
	exporter, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint+"/v1/traces"))
	if err != nil {
		return nil, fmt.Errorf("creating OTLP trace exporter: %w", err)
	}
	// Only the service name: the default resource would add the host name
	// and process command line, which the boundary does not admit.
	res := resource.NewSchemaless(attribute.String("service.name", process))
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	return &Tracing{provider: provider, tracer: provider.Tracer("cairn")}, nil
}

// Shutdown flushes spans still buffered and stops exporting.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.provider == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// Span is one started span.
type Span struct {
	t    *Tracing
	span trace.Span
}

// Start opens a span of a registered name with fields that passed the
// boundary; a field that fails it is left off, never exported.
func (t *Tracing) Start(ctx context.Context, name string, fields map[string]Value) (context.Context, Span) {
	if t == nil {
		return ctx, Span{}
	}
	if !slices.Contains(Spans, name) {
		// An unregistered name is a programming error; the work still
		// runs, untraced.
		return ctx, Span{}
	}
	ctx, span := t.tracer.Start(ctx, name)
	s := Span{t: t, span: span}
	s.Set(fields)
	return ctx, s
}

// Set adds fields to the span, each checked at the boundary.
func (s Span) Set(fields map[string]Value) {
	if s.span == nil || !s.span.IsRecording() {
		return
	}
	for name, v := range fields {
		if !namePattern.MatchString(name) || v.check() != nil {
			continue
		}
		s.span.SetAttributes(v.attribute(name))
	}
}

// End closes the span with its outcome: nil is ok; an error marks the span
// failed with the fixed classification "error", never the message.
func (s Span) End(err error) {
	if s.span == nil {
		return
	}
	if err != nil {
		s.span.SetStatus(codes.Error, "error")
		s.span.SetAttributes(attribute.String("outcome", "error"))
	} else {
		s.span.SetAttributes(attribute.String("outcome", "ok"))
	}
	s.span.End()
}

// attribute renders a checked value.
func (v Value) attribute(name string) attribute.KeyValue {
	switch v.kind {
	case "id", "enum", "route":
		return attribute.String(name, v.str)
	case "duration":
		return attribute.Int64(name+"_ms", time.Duration(v.num).Milliseconds())
	default:
		return attribute.Int64(name, v.num)
	}
}

// Route is an HTTP route template of the application (/v1/runs/:id), one
// of known; a concrete path is not a template and is refused.
func Route(template string, known []string) Value {
	return Value{kind: "route", str: template, allowed: known}
}

// Recording reports whether spans are exported; without an endpoint the
// HTTP surface skips tracing altogether.
func (t *Tracing) Recording() bool { return t != nil && t.provider != nil }

// StartRequest opens the http_request span of one request, continuing the
// caller's W3C trace context (traceparent, "" for none), so a trace crosses
// a proxy and the API.
func (t *Tracing) StartRequest(ctx context.Context, traceparent string) (context.Context, Span) {
	carrier := propagation.MapCarrier{}
	if traceparent != "" {
		carrier.Set("traceparent", traceparent)
	}
	ctx = propagation.TraceContext{}.Extract(ctx, carrier)
	return t.Start(ctx, "http_request", nil)
}

// EndRequest closes a request's span with its route template (one of
// routes, or "unmatched"), method and status code; a 5xx marks it failed.
func (s Span) EndRequest(route string, routes []string, method string, status int) {
	if !methods[method] {
		method = "other"
	}
	s.Set(map[string]Value{
		"route":       Route(route, append(slices.Clip(routes), "unmatched")),
		"method":      Enum(lowerMethod(method), "get", "head", "post", "put", "patch", "delete", "options", "other"),
		"status_code": Count(int64(status)),
	})
	var failed error
	if status >= 500 {
		failed = fmt.Errorf("status %s", strconv.Itoa(status))
	}
	s.End(failed)
}

func lowerMethod(m string) string {
	b := []byte(m)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// riverMiddleware traces River jobs.
type riverMiddleware struct {
	river.MiddlewareDefaults
	t     *Tracing
	kinds []string
}

// JobMiddleware traces every job as a river_job span: its kind (one of
// kinds, the worker's registered job kinds), queue, attempt and duration.
// Job arguments never become attributes.
func (t *Tracing) JobMiddleware(kinds []string) rivertype.WorkerMiddleware {
	return &riverMiddleware{t: t, kinds: kinds}
}

func (m *riverMiddleware) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	started := time.Now()
	ctx, span := m.t.Start(ctx, "river_job", map[string]Value{
		"kind":    Enum(job.Kind, m.kinds...),
		"queue":   Enum(job.Queue, m.queues()...),
		"attempt": Count(int64(job.Attempt)),
	})
	err := doInner(ctx)
	span.Set(map[string]Value{"duration": Duration(time.Since(started))})
	span.End(err)
	return err
}

// queues are the queue names a job span may carry.
func (m *riverMiddleware) queues() []string { return []string{"default", "runs", "policy"} }
