package telemetry_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/platform/telemetry"
)

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
			strings.Contains(err.Error(), "AKIA") || strings.Contains(err.Error(), "123456789012") {
			t.Errorf("%s: the rejection echoes the value: %v (%s)", what, err, s)
		}
	}
	for _, name := range []string{"user_signed_in_alice@example.com", "Policy_Evaluated", "custom_event", ""} {
		if err := telemetry.Validate(telemetry.Event{Name: name}); !errors.Is(err, telemetry.ErrRejected) {
			t.Errorf("event name %q crossed the boundary", name)
		}
	}
	if err := telemetry.Validate(telemetry.Event{Name: "policy_evaluated", Fields: map[string]telemetry.Value{
		"owner@example.com": telemetry.Count(1)}}); !errors.Is(err, telemetry.ErrRejected) {
		t.Error("an e-mail as a field name crossed the boundary")
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
