package telemetry_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/riverqueue/river/rivertype"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/platform/telemetry"
)

// receiver is an OTLP/HTTP trace endpoint: it decodes each export request
// from protobuf as a collector would and keeps the spans with their
// resource attributes.
type receiver struct {
	*httptest.Server
	mu        sync.Mutex
	spans     []*tracepb.Span
	resources [][]*commonpb.KeyValue
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		body, err := io.ReadAll(io.LimitReader(req.Body, 8<<20))
		var export coltrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &export)
		}
		if err != nil {
			http.Error(w, "undecodable", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range export.ResourceSpans {
			r.resources = append(r.resources, rs.GetResource().GetAttributes())
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) collected() ([]*tracepb.Span, [][]*commonpb.KeyValue) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...), append([][]*commonpb.KeyValue(nil), r.resources...)
}

func value(kv *commonpb.KeyValue) string {
	if s, ok := kv.GetValue().GetValue().(*commonpb.AnyValue_StringValue); ok {
		return s.StringValue
	}
	return ""
}

// TestRequestSpansCrossTheBoundaryOnly runs a real API exporting to an
// in-process OTLP/HTTP receiver, makes requests that carry a workspace
// name, an e-mail address and IDs in their paths and bodies, and checks
// that spans arrive named by route template and carry only the allowed
// attributes, none of those values.
func TestRequestSpansCrossTheBoundaryOnly(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	env := apitest.New(t, func(s *apitest.Settings) { s.Config.OTLPEndpoint = rcv.URL })
	owner := env.WithOrganization("tracing")
	var p, w struct{ ID string }
	owner.Mutate(http.MethodPost, "/v1/projects", map[string]string{"name": "acme-infra-repo"}).MustStatus(t, http.StatusCreated).Data(t, &p)
	owner.Mutate(http.MethodPost, "/v1/workspaces", map[string]any{"project_id": p.ID, "name": "github.com-acme-secret-repo",
		"execution_settings": map[string]string{"tool_version": "1.10.6", "region": "us", "platform": "linux_amd64"}}).
		MustStatus(t, http.StatusCreated).Data(t, &w)
	owner.Get("/v1/workspaces/"+w.ID).MustStatus(t, http.StatusOK)
	owner.Get("/v1/runs/run_aaaaaaaaaaaaaaaaaaaaaaaaaa").MustStatus(t, http.StatusNotFound)
	env.Anonymous().Get("/no/such/path?email=alice@example.com")

	if err := env.Server.Tracing().Shutdown(context.Background()); err != nil {
		t.Fatalf("flushing spans: %v", err)
	}
	spans, resources := rcv.collected()
	forbidden := []string{w.ID, p.ID, "acme", "@", owner.OrganizationID, "127.0.0.1", "run_aaaa"}
	allowed := map[string]bool{"route": true, "method": true, "status_code": true, "outcome": true}
	routes := map[string]bool{}
	for _, s := range spans {
		if s.Name != "http_request" {
			t.Errorf("unexpected span %q", s.Name)
		}
		for _, kv := range s.Attributes {
			if !allowed[kv.Key] {
				t.Errorf("span carries attribute %q", kv.Key)
			}
			for _, f := range forbidden {
				if strings.Contains(value(kv), f) {
					t.Errorf("attribute %s carries %q", kv.Key, value(kv))
				}
			}
			if kv.Key == "route" {
				routes[value(kv)] = true
			}
		}
	}
	for _, want := range []string{"/v1/workspaces/:id", "/v1/runs/:id", "/v1/workspaces", "unmatched"} {
		if !routes[want] {
			t.Errorf("no span for route %s (got %v)", want, routes)
		}
	}
	for _, attrs := range resources {
		if len(attrs) != 1 || attrs[0].Key != "service.name" || value(attrs[0]) != "cairn_api" {
			t.Errorf("resource attributes %v, want only service.name", attrs)
		}
	}
}

// TestSpanFieldsFailClosed feeds forbidden values to a span and to the job
// middleware directly: an e-mail as an ID, a resource address as an enum,
// a concrete path as a route, an unregistered job kind. None is exported;
// the allowed fields are.
func TestSpanFieldsFailClosed(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	tr, err := telemetry.StartTracing(context.Background(), rcv.URL, "cairn_worker")
	if err != nil {
		t.Fatal(err)
	}
	runID := id.New("run")
	_, span := tr.Start(context.Background(), "sandbox_phase", map[string]telemetry.Value{
		"run_id":     telemetry.ID(runID),
		"owner":      telemetry.ID("alice@example.com"),
		"resource":   telemetry.Enum("aws_instance.web", "aws_instance.web"),
		"route":      telemetry.Route("/v1/runs/"+runID, []string{"/v1/runs/:id"}),
		"Bad-Name":   telemetry.Count(1),
		"size_bytes": telemetry.Bytes(42),
	})
	span.End(errors.New("tofu printed secret-value"))
	_, ignored := tr.Start(context.Background(), "repository_cloned", nil)
	ignored.End(nil)
	mw := tr.JobMiddleware([]string{"run_phase"})
	for _, kind := range []string{"run_phase", "acme/secret-repo"} {
		job := &rivertype.JobRow{Kind: kind, Queue: "runs", Attempt: 1}
		if err := mw.Work(context.Background(), job, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans, _ := rcv.collected()
	got := map[string]map[string]string{}
	var kinds []string
	for _, s := range spans {
		attrs := map[string]string{}
		for _, kv := range s.Attributes {
			attrs[kv.Key] = value(kv)
		}
		if s.Name == "river_job" {
			kinds = append(kinds, attrs["kind"])
		}
		got[s.Name] = attrs
		if s.Status.GetMessage() != "" && s.Status.GetMessage() != "error" {
			t.Errorf("span status carries %q", s.Status.GetMessage())
		}
	}
	phase := got["sandbox_phase"]
	if phase == nil || phase["run_id"] != runID || phase["outcome"] != "error" {
		t.Fatalf("sandbox_phase span: %v", phase)
	}
	for _, k := range []string{"owner", "resource", "route", "Bad-Name"} {
		if _, ok := phase[k]; ok {
			t.Errorf("forbidden field %s exported as %q", k, phase[k])
		}
	}
	if _, ok := phase["size_bytes"]; !ok {
		t.Error("an allowed byte size was dropped")
	}
	if _, ok := got["repository_cloned"]; ok {
		t.Error("an unregistered span name was exported")
	}
	if len(kinds) != 2 || kinds[0] != "run_phase" || kinds[1] != "" {
		t.Errorf("job kinds exported: %q", kinds)
	}
}

// TestTracingOffWithoutEndpoint checks that no endpoint means no export and
// no failure.
func TestTracingOffWithoutEndpoint(t *testing.T) {
	t.Parallel()
	tr, err := telemetry.StartTracing(context.Background(), "", "cairn_api")
	if err != nil {
		t.Fatal(err)
	}
	_, span := tr.Start(context.Background(), "http_request", map[string]telemetry.Value{"status_code": telemetry.Count(200)})
	span.End(nil)
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}
