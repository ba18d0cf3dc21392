package worker

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/rivertype"

	"github.com/cairnhq/cairn/api/platform/dbtest"
	"github.com/cairnhq/cairn/api/platform/failure/failuretest"
	"github.com/cairnhq/cairn/api/platform/id"
)

const (
	failingSecret = "rat_jobpanicsecretjobpanicsecret"
	failingInput  = "resource \"aws_db\" { password = \"carol-input\" }"
)

type failingArgs struct {
	RunID string `json:"run_id"`
	Panic bool   `json:"panic"`
}

func (failingArgs) Kind() string { return "failure_test_job" }

type failingWorker struct {
	river.WorkerDefaults[failingArgs]
	done chan struct{}
}

func (w *failingWorker) Work(_ context.Context, job *river.Job[failingArgs]) error {
	defer func() { w.done <- struct{}{} }()
	if job.Args.Panic {
		panic(failingSecret)
	}
	return fmt.Errorf("planning %s: %w", failingInput, errors.New(failingSecret))
}

// startClient starts client until the test ends, returning the context
// it runs in.
func startClient(t *testing.T, client *river.Client[*sql.Tx]) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop, done := context.WithTimeout(context.Background(), 10*time.Second)
		defer done()
		_ = client.Stop(stop)
	})
	return ctx
}

// TestJobFailuresLogOnlyTheirClassification: a job that panics with a
// secret-looking value and one that fails with an error wrapping user input
// leave neither in any log line (River's own included, at debug level) nor
// in the job's stored errors; the report names the classification, the
// job's kind and ID and its run.
func TestJobFailuresLogOnlyTheirClassification(t *testing.T) {
	t.Parallel()
	conn, _ := dbtest.NewURL(t)
	var log failuretest.Log
	logger := log.Logger()
	workers := river.NewWorkers()
	w := &failingWorker{done: make(chan struct{}, 4)}
	river.AddWorker(workers, w)
	client, err := river.NewClient(riverdatabasesql.New(conn.DB), &river.Config{
		Logger: logger, Workers: workers, Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2}},
		FetchPollInterval: 100 * time.Millisecond, Middleware: jobMiddleware(logger, nil, newQueueWakes([]string{river.QueueDefault}, RetryPoll)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := startClient(t, client)
	runID := id.New("run")
	for _, panics := range []bool{true, false} {
		if _, err := client.Insert(ctx, failingArgs{RunID: runID, Panic: panics}, &river.InsertOpts{MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		select {
		case <-w.done:
		case <-time.After(30 * time.Second):
			t.Fatal("the failing jobs did not run")
		}
	}
	// Both jobs end discarded; wait for River to record it.
	var stored string
	for deadline := time.Now().Add(30 * time.Second); ; {
		var discarded int
		if err := conn.Get(&discarded, `SELECT count(*) FROM river_job WHERE kind = $1 AND state = $2`,
			failingArgs{}.Kind(), rivertype.JobStateDiscarded); err != nil {
			t.Fatal(err)
		}
		if discarded == 2 {
			if err := conn.Get(&stored, `SELECT string_agg(errors::text, ' ') FROM river_job WHERE kind = $1`, failingArgs{}.Kind()); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 2 failing jobs discarded", discarded)
		}
		time.Sleep(50 * time.Millisecond)
	}
	leaks := []string{failingSecret, "carol-input"}
	for _, classification := range []string{"non_error", "error"} {
		failuretest.RequireReport(t, log.String(), classification, leaks, `"classification":"`+classification+`","job_kind":"failure_test_job"`)
	}
	failuretest.RequireReport(t, stored+" "+log.String(), "error", leaks)
	if !strings.Contains(log.String(), `"run_id":"`+runID+`"`) || !strings.Contains(stored, "job failed (error)") {
		t.Fatalf("the reports do not name the run, or River kept no fixed text:\n%s\n%s", log.String(), stored)
	}
}

// TestHealthEndpointPanicsLogOnlyTheirClassification: the worker's own HTTP
// endpoint answers a panic with a bare 500 and logs its classification and
// request ID only.
func TestHealthEndpointPanicsLogOnlyTheirClassification(t *testing.T) {
	t.Parallel()
	var log failuretest.Log
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := ServeHealth(ctx, addr, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(failingSecret) }), log.Logger()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/health")
	if err != nil {
		t.Fatalf("a panicking health endpoint: %v", err)
	}
	resp.Body.Close()
	id := resp.Header.Get("X-Request-Id")
	if resp.StatusCode != http.StatusInternalServerError || id == "" {
		t.Fatalf("a panicking health endpoint: %d %q", resp.StatusCode, id)
	}
	failuretest.RequireReport(t, log.String(), "non_error", []string{failingSecret}, `"request_id":"`+id+`"`)
}
