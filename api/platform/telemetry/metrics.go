package telemetry

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// maxLabelValues bounds the distinct values a label read from the database
// (a region) may take; the rest are reported as "other".
const maxLabelValues = 32

// Metrics is one process's registry.
type Metrics struct {
	Registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// policyEvaluation is process-wide: evaluations happen in whichever
// service the process assembled, and each registry of the process shows it.
var policyEvaluation = prometheus.NewHistogram(prometheus.HistogramOpts{
	Name: "cairn_policy_evaluation_seconds", Help: "Time to evaluate one run's policy check.",
	Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
})

// ObservePolicyEvaluation records one policy check's duration.
func ObservePolicyEvaluation(d time.Duration) { policyEvaluation.Observe(d.Seconds()) }

// NewMetrics registers the process and Go collectors, HTTP metrics, policy
// evaluation time and, when conn is set, the queue, sandbox and lease
// gauges read at scrape time.
func NewMetrics(conn *sqlx.DB) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cairn_http_requests_total", Help: "HTTP requests by route template, method and status class.",
		}, []string{"route", "method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "cairn_http_request_duration_seconds", Help: "HTTP request latency by route template and method.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route", "method"}),
	}
	m.Registry.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector(),
		m.requests, m.latency, policyEvaluation)
	if conn != nil {
		m.Registry.MustRegister(&dbCollector{db: conn})
	}
	return m
}

// Handler serves the registry in the Prometheus text format. It sets no
// promhttp Timeout: the database collector bounds its own queries (5 s),
// and http.TimeoutHandler would derive a context from fasthttp's request
// context under cairn-api's adaptor, which races with server shutdown.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}

// methods bounds the method label; anything else is "other".
var methods = map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "OPTIONS": true}

// methodLabel is method's label as a string this package owns.
func methodLabel(method string) string {
	switch method {
	case "GET":
		return "GET"
	case "HEAD":
		return "HEAD"
	case "POST":
		return "POST"
	case "PUT":
		return "PUT"
	case "PATCH":
		return "PATCH"
	case "DELETE":
		return "DELETE"
	case "OPTIONS":
		return "OPTIONS"
	}
	return "other"
}

// ObserveRequest counts one answered request under its route template
// (/v1/runs/:id, never /v1/runs/run_abc…), so the label set is the
// application's routes; the HTTP surface passes "unmatched" for a request
// no route matched. A method outside the usual set counts as "other".
func (m *Metrics) ObserveRequest(route, method string, status int, elapsed time.Duration) {
	// The label is always one of this package's own strings: the registry
	// keeps a series' label values, and an HTTP server may hand over a
	// method that aliases a buffer it reuses for the next request, which
	// would rename a stored series under the registry (a scrape then
	// fails with a duplicate series).
	method = methodLabel(method)
	m.requests.WithLabelValues(route, method, strconv.Itoa(status/100)+"xx").Inc()
	m.latency.WithLabelValues(route, method).Observe(elapsed.Seconds())
}

// dbCollector reads queue depth and age, active sandboxes and capacity
// leases at scrape time, from the shared database, so every replica
// reports the same installation-wide figures.
type dbCollector struct{ db *sqlx.DB }

var (
	queueDepth = prometheus.NewDesc("cairn_job_queue_depth", "River jobs by queue and state.", []string{"queue", "state"}, nil)
	queueAge   = prometheus.NewDesc("cairn_job_queue_oldest_available_seconds", "Age of the oldest available job per queue.",
		[]string{"queue"}, nil)
	sandboxes = prometheus.NewDesc("cairn_sandboxes_active", "Run attempts running in a sandbox.", nil, nil)
	leases    = prometheus.NewDesc("cairn_capacity_leases_active", "Held capacity leases by region.", []string{"region"}, nil)
	scrapeErr = prometheus.NewDesc("cairn_metrics_database_up", "Whether the database answered the last scrape.", nil, nil)
)

// jobStates is River's fixed set of job states.
var jobStates = map[string]bool{"available": true, "cancelled": true, "completed": true, "discarded": true,
	"pending": true, "retryable": true, "running": true, "scheduled": true}

func (d *dbCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, desc := range []*prometheus.Desc{queueDepth, queueAge, sandboxes, leases, scrapeErr} {
		ch <- desc
	}
}

func (d *dbCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	up := 1.0
	if err := d.collect(ctx, ch); err != nil {
		up = 0
	}
	ch <- prometheus.MustNewConstMetric(scrapeErr, prometheus.GaugeValue, up)
}

func (d *dbCollector) collect(ctx context.Context, ch chan<- prometheus.Metric) error {
	var depth []struct {
		Queue string `db:"queue"`
		State string `db:"state"`
		N     int64  `db:"n"`
	}
	// Completed jobs are retained for a while and would dominate the
	// count; they are not queue depth.
	if err := sqlx.SelectContext(ctx, d.db, &depth, `SELECT queue, state::text AS state, count(*) AS n FROM river_job
		WHERE state <> 'completed' GROUP BY queue, state`); err != nil {
		return err
	}
	queues := map[string]bool{}
	depthOf := map[[2]string]float64{}
	for _, r := range depth {
		if jobStates[r.State] {
			depthOf[[2]string{boundedLabel(queues, r.Queue), r.State}] += float64(r.N)
		}
	}
	for k, n := range depthOf {
		ch <- prometheus.MustNewConstMetric(queueDepth, prometheus.GaugeValue, n, k[0], k[1])
	}
	var ages []struct {
		Queue string  `db:"queue"`
		Age   float64 `db:"age"`
	}
	if err := sqlx.SelectContext(ctx, d.db, &ages, `SELECT queue, extract(epoch FROM now() - min(scheduled_at))::float8 AS age
		FROM river_job WHERE state = 'available' GROUP BY queue`); err != nil {
		return err
	}
	queues = map[string]bool{}
	ageOf := map[string]float64{}
	for _, r := range ages {
		q := boundedLabel(queues, r.Queue)
		ageOf[q] = max(ageOf[q], r.Age, 0)
	}
	for q, age := range ageOf {
		ch <- prometheus.MustNewConstMetric(queueAge, prometheus.GaugeValue, age, q)
	}
	var active int64
	if err := sqlx.GetContext(ctx, d.db, &active, `SELECT count(*) FROM run_attempts
		WHERE status = 'running' AND sandbox_id IS NOT NULL`); err != nil {
		return err
	}
	ch <- prometheus.MustNewConstMetric(sandboxes, prometheus.GaugeValue, float64(active))
	var held []struct {
		Region string `db:"region"`
		N      int64  `db:"n"`
	}
	if err := sqlx.SelectContext(ctx, d.db, &held, `SELECT r.region, count(l.id) AS n FROM capacity_regions r
		LEFT JOIN capacity_leases l ON l.region = r.region AND l.released_at IS NULL GROUP BY r.region ORDER BY r.region`); err != nil {
		return err
	}
	regions := map[string]bool{}
	heldIn := map[string]float64{}
	for _, r := range held {
		heldIn[boundedLabel(regions, r.Region)] += float64(r.N)
	}
	for region, n := range heldIn {
		ch <- prometheus.MustNewConstMetric(leases, prometheus.GaugeValue, n, region)
	}
	return nil
}

// boundedLabel passes the first maxLabelValues distinct values and folds
// the rest into "other" (callers sum what folds together).
func boundedLabel(seen map[string]bool, v string) string {
	if seen[v] || len(seen) < maxLabelValues {
		seen[v] = true
		return v
	}
	return "other"
}
