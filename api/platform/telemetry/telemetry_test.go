package telemetry_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/platform/telemetry"
)

// Secrets a test offers the boundary: a JWT, a PEM private key and a
// Cairn service-account token (prefix and 40 base32 characters).
const (
	jwt    = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZUBleGFtcGxlLmNvbSJ9.c2lnbmF0dXJlc2lnbmF0dXJlc2lnbmF0dXJl"
	pem    = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"
	bearer = "sst_abcdefghijklmnopqrstuvwxyz234567abcdefgh"
)

// TestBoundaryRejectsWhatMayNotLeave offers each category SPEC §6 keeps in
// — repository names, cloud identifiers, resource addresses, e-mail
// addresses, secrets, artifact content — as an ID, an enum value (listed
// by its enum), a route and an event name: every one is refused, and the
// refusal never repeats it.
func TestBoundaryRejectsWhatMayNotLeave(t *testing.T) {
	t.Parallel()
	outcomes := []string{"passed", "failed", "error"}
	good := telemetry.Event{Name: "policy_evaluated", Fields: map[string]telemetry.Value{
		"run_id":   telemetry.ID(id.New("run")),
		"outcome":  telemetry.Enum("passed", outcomes...),
		"duration": telemetry.Duration(1500 * time.Millisecond),
		"policies": telemetry.Count(3),
		"input":    telemetry.Bytes(1 << 20),
	}}
	if err := telemetry.Validate(good); err != nil {
		t.Fatalf("a clean event was rejected: %v", err)
	}
	forbidden := map[string]telemetry.Value{
		"an e-mail as an ID":               telemetry.ID("alice@example.com"),
		"an e-mail as an enum":             telemetry.Enum("alice@example.com", "alice@example.com"),
		"a resource address":               telemetry.Enum("aws_instance.web[0]", "aws_instance.web[0]"),
		"a resource address as an ID":      telemetry.ID("module.vpc.aws_subnet.a"),
		"a repository name":                telemetry.Enum("acme/infrastructure", "acme/infrastructure"),
		"a cloud identifier":               telemetry.ID("arn:aws:iam::123456789012:role/deploy"),
		"an account number":                telemetry.Enum("123456789012", "123456789012"),
		"a secret":                         telemetry.ID("AKIAIOSFODNN7EXAMPLE"),
		"state content":                    telemetry.Enum(`{"version":4}`, `{"version":4}`),
		"a value outside its enum":         telemetry.Enum("failed_hard", outcomes...),
		"a negative count":                 telemetry.Count(-1),
		"a negative duration":              telemetry.Duration(-time.Second),
		"a zero Value (no constructor)":    {},
		"an ID with an uppercase alphabet": telemetry.ID("run_ABCDEFGHIJKLMNOPQRSTUVWXYZ"),
		// Each category SPEC §6 keeps in, as an ID and as an enum value
		// (the enum lists it, as a careless caller would).
		"a repository name as an ID":                     telemetry.ID("acme/infra"),
		"a repository name as an enum":                   telemetry.Enum("acme/infra", "acme/infra"),
		"an AWS account ID as an ID":                     telemetry.ID("123456789012"),
		"an ARN as an enum":                              telemetry.Enum("arn:aws:iam::123456789012:role/deploy", "arn:aws:iam::123456789012:role/deploy"),
		"a GCP project ID as an enum":                    telemetry.Enum("acme-prod-123456", "acme-prod-123456"),
		"a GCP project ID as an ID":                      telemetry.ID("acme-prod-123456"),
		"an Azure subscription as an enum":               telemetry.Enum("0f8fad5b-d9cb-469f-a165-70867728950e", "0f8fad5b-d9cb-469f-a165-70867728950e"),
		"an Azure subscription as an ID":                 telemetry.ID("0f8fad5b-d9cb-469f-a165-70867728950e"),
		"a resource address as an enum":                  telemetry.Enum("module.vpc.aws_subnet.a", "module.vpc.aws_subnet.a"),
		"an indexed address as an ID":                    telemetry.ID("aws_instance.web[0]"),
		"an e-mail address as a route":                   telemetry.Route("alice@example.com", []string{"alice@example.com"}),
		"an AWS access key as an enum":                   telemetry.Enum("AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
		"a lowercased access key as an ID":               telemetry.ID("akiaiosfodnn7example"),
		"a JWT as an ID":                                 telemetry.ID(jwt),
		"a JWT as an enum":                               telemetry.Enum(jwt, jwt),
		"a PEM key as an enum":                           telemetry.Enum(pem, pem),
		"a Cairn bearer token as an ID":                  telemetry.ID(bearer),
		"a Cairn bearer token as an enum":                telemetry.Enum(bearer, bearer),
		"artifact content as an enum":                    telemetry.Enum("resource \"aws_instance\" \"web\" {}", "resource \"aws_instance\" \"web\" {}"),
		"state content as an ID":                         telemetry.ID(`{"version":4,"serial":1}`),
		"an ID of 26 characters that id.New never makes": telemetry.ID("run_abcdefghijklmnopqrstuvwxyb"),
	}
	for what, v := range forbidden {
		e := telemetry.Event{Name: "policy_evaluated", Fields: map[string]telemetry.Value{"field": v}}
		err := telemetry.Validate(e)
		if !errors.Is(err, telemetry.ErrRejected) {
			t.Errorf("%s crossed the boundary", what)
			continue
		}
		// The rejection names the field, never the value.
		if s := fmt.Sprint(v); strings.Contains(err.Error(), "example.com") || strings.Contains(err.Error(), "aws_instance") ||
			strings.Contains(err.Error(), "AKIA") || strings.Contains(err.Error(), "123456789012") ||
			strings.Contains(err.Error(), "acme") || strings.Contains(err.Error(), "eyJ") || strings.Contains(err.Error(), "PRIVATE") {
			t.Errorf("%s: the rejection echoes the value: %v (%s)", what, err, s)
		}
	}
	for _, name := range []string{"user_signed_in_alice@example.com", "Policy_Evaluated", "custom_event", "",
		"acme/infra", "plan_of_acme_infra", "aws_instance.web[0]", "123456789012", "AKIAIOSFODNN7EXAMPLE", jwt, pem, bearer} {
		if err := telemetry.Validate(telemetry.Event{Name: name}); !errors.Is(err, telemetry.ErrRejected) {
			t.Errorf("event name %q crossed the boundary", name)
		}
	}
	for _, field := range []string{"owner@example.com", "acme/infra", "aws_instance.web[0]", "AKIAIOSFODNN7EXAMPLE"} {
		if err := telemetry.Validate(telemetry.Event{Name: "policy_evaluated", Fields: map[string]telemetry.Value{
			field: telemetry.Count(1)}}); !errors.Is(err, telemetry.ErrRejected) {
			t.Errorf("%q as a field name crossed the boundary", field)
		}
	}
	// Every ID Cairn makes passes.
	for range 64 {
		if v := id.New("run"); telemetry.Validate(telemetry.Event{Name: "policy_evaluated",
			Fields: map[string]telemetry.Value{"run_id": telemetry.ID(v)}}) != nil {
			t.Fatalf("the ID %s was refused", v)
		}
	}
	// Unhandled failures are classified, never described.
	for recovered, want := range map[any]string{errors.New("db password=hunter2"): "error", "boom alice@example.com": "non_error", 42: "non_error"} {
		e := telemetry.Event{Name: "unhandled_failure", Fields: map[string]telemetry.Value{"kind": telemetry.Failure(recovered)}}
		if err := telemetry.Validate(e); err != nil {
			t.Fatal(err)
		}
		if attrs := fmt.Sprint(e.Attrs()); attrs != "[kind "+want+"]" {
			t.Errorf("failure %v rendered as %s", recovered, attrs)
		}
	}
}

// TestMetricsAreScrapedWithBoundedLabels scrapes a real server's /metrics:
// closed without the operator token, and with it every request counted
// under its route template (never the IDs in the path), plus the database
// gauges.
func TestMetricsAreScrapedWithBoundedLabels(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("metrics")
	missing := id.New("ws")
	u.Get("/v1/workspaces/" + missing)
	for range 3 {
		resp, err := http.Get(env.URL + "/health")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	scrape := func(token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, env.URL+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, token := range []string{"", "wrong-token"} {
		if st, _ := scrape(token); st != http.StatusNotFound {
			t.Fatalf("/metrics with token %q answered %d", token, st)
		}
	}
	st, body := scrape(apitest.OperatorToken)
	if st != http.StatusOK {
		t.Fatalf("/metrics answered %d", st)
	}
	for _, want := range []string{
		`cairn_http_requests_total{method="GET",route="/health",status="2xx"} 3`,
		`cairn_http_requests_total{method="GET",route="/v1/workspaces/:id",status="4xx"} 1`,
		`cairn_capacity_leases_active{region="us"} 0`,
		`cairn_sandboxes_active 0`,
		`cairn_metrics_database_up 1`,
		`cairn_policy_evaluation_seconds_bucket`,
		`process_resident_memory_bytes`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if strings.Contains(body, missing) || strings.Contains(body, "@example.com") {
		t.Fatal("an ID or e-mail reached a metric label")
	}
	// Every label value is a route template, a method, a status class, a
	// queue, a job state or a region: short and free of IDs.
	labels := regexp.MustCompile(`[a-z_]+="([^"]*)"`)
	for _, m := range labels.FindAllStringSubmatch(body, -1) {
		if regexp.MustCompile(`_[a-z2-7]{26}`).MatchString(m[1]) || len(m[1]) > 120 {
			t.Fatalf("unbounded label value %q", m[1])
		}
	}
}

// TestRequestCountsSurviveReusedMethodBuffers hands the counter a method
// that aliases a buffer the caller then reuses, as Fiber's zero-copy
// strings do: the stored series must keep its labels, so a scrape never
// sees two series with the same name and labels.
func TestRequestCountsSurviveReusedMethodBuffers(t *testing.T) {
	t.Parallel()
	m := telemetry.NewMetrics(nil)
	buf := []byte("GET")
	m.ObserveRequest("/health", unsafe.String(&buf[0], len(buf)), 200, time.Millisecond)
	copy(buf, "PUT")
	m.ObserveRequest("/health", unsafe.String(&buf[0], len(buf)), 200, time.Millisecond)
	copy(buf, "GET")
	m.ObserveRequest("/health", unsafe.String(&buf[0], len(buf)), 200, time.Millisecond)

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape answered %d: %s", rec.Code, body)
	}
	for _, want := range []string{
		`cairn_http_requests_total{method="GET",route="/health",status="2xx"} 2`,
		`cairn_http_requests_total{method="PUT",route="/health",status="2xx"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the scrape lacks %s", want)
		}
	}
}

// TestFunnelIsTheLaunchStepsOnly: product analytics is the allowlisted
// launch funnel: each step with an opaque organization ID crosses the
// boundary; automatic page, element and session capture, any other step,
// and a non-opaque organization (a slug, an e-mail) are refused.
func TestFunnelIsTheLaunchStepsOnly(t *testing.T) {
	t.Parallel()
	org := id.New("org")
	for _, step := range telemetry.FunnelSteps {
		if err := telemetry.Validate(telemetry.FunnelEvent(step, org)); err != nil {
			t.Fatalf("step %s refused: %v", step, err)
		}
	}
	for _, step := range []string{"page_view", "pageview", "element_clicked", "autocapture", "session_started", "identify", ""} {
		if err := telemetry.Validate(telemetry.FunnelEvent(step, org)); !errors.Is(err, telemetry.ErrRejected) {
			t.Fatalf("step %q crossed the boundary", step)
		}
		if err := telemetry.Validate(telemetry.Event{Name: step}); !errors.Is(err, telemetry.ErrRejected) {
			t.Fatalf("event %q crossed the boundary", step)
		}
	}
	for _, who := range []string{"acme", "alice@example.com", "usr_" + strings.Repeat("a", 26)[:25] + "Z"} {
		if err := telemetry.Validate(telemetry.FunnelEvent(telemetry.StepRunCreated, who)); !errors.Is(err, telemetry.ErrRejected) {
			t.Fatalf("organization %q crossed the boundary", who)
		}
	}
}
