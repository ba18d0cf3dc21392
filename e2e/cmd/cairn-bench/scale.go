package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnhq/cairn/api/assembly"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/platform/db"
	cairnrun "github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/e2e/devstack"
)

// benchReplicas compares one API replica with two over the same database:
// a representative read and a run creation, each spread round robin over
// the replicas by the clients (as a load balancer would), reported as the
// ratio of two to one.
func benchReplicas(client *http.Client, first *apiProcess, dbURL, token string, workspaceIDs []string) (err error) {
	second, err := startAPI(dbURL, nil)
	if err != nil {
		return err
	}
	defer second.Stop()
	// One configuration version per workspace; runs are created from them.
	configs := make([]string, len(workspaceIDs))
	for i, ws := range workspaceIDs {
		if configs[i], err = uploadConfiguration(client, first.URL, token, ws); err != nil {
			return err
		}
	}
	read := func(urls []string) func(int, int) bool {
		return func(w, i int) bool {
			return call(client, http.MethodGet, urls[(w+i)%len(urls)]+"/v1/workspaces?limit=20", token, nil, nil, nil) == http.StatusOK
		}
	}
	var mu sync.Mutex
	var created []string
	create := func(urls []string) func(int, int) bool {
		return func(w, i int) bool {
			k := (w*7919 + i) % len(workspaceIDs)
			var id string
			ok := call(client, http.MethodPost, urls[(w+i)%len(urls)]+"/v1/runs", token, map[string]string{
				"workspace_id": workspaceIDs[k], "configuration_version_id": configs[k], "kind": "plan_only", "message": "bench"},
				map[string]any{"Idempotency-Key": fmt.Sprintf("bench-run-%d-%d-%d", w, i, time.Now().UnixNano())}, &id) == http.StatusCreated
			if ok {
				mu.Lock()
				created = append(created, id)
				mu.Unlock()
			}
			return ok
		}
	}
	// The runs created here are cancelled before the phase ends: left
	// pending, the next phase's worker would plan thousands of them while
	// that phase measures its own.
	defer func() {
		if cerr := cancelRuns(client, first.URL, token, created); cerr != nil && err == nil {
			err = fmt.Errorf("cancelling the phase's runs: %w", cerr)
		}
	}()
	// No worker runs in this phase, so every created run stays pending:
	// the launch control's ceiling of pending runs per workspace (50 by
	// default) would refuse creations within seconds and turn the
	// comparison into one of refusals. It is raised for the phase.
	setCeiling := func(n int) func(doc map[string]any) error {
		return func(doc map[string]any) error {
			ceilings, ok := doc["ceilings"].(map[string]any)
			if !ok {
				return fmt.Errorf("launch control has no ceilings: %v", doc)
			}
			ceilings["pending_runs_per_workspace"] = n
			return nil
		}
	}
	var previous any
	if err := changeLaunchControl(client, first.URL, "bench: replicas create without a worker", func(doc map[string]any) error {
		if ceilings, ok := doc["ceilings"].(map[string]any); ok {
			previous = ceilings["pending_runs_per_workspace"]
		}
		return setCeiling(launch.MaxCeiling)(doc)
	}); err != nil {
		return err
	}
	defer func() {
		if n, ok := previous.(float64); ok {
			_ = changeLaunchControl(client, first.URL, "bench: replicas done", setCeiling(int(n)))
		}
	}()
	one, two := []string{first.URL}, []string{first.URL, second.URL}
	readOne := load("GET /v1/workspaces?limit=20, 1 replica", *concurrency, *duration, read(one))
	report(readOne, result{}, "")
	readTwo := load("GET /v1/workspaces?limit=20, 2 replicas", *concurrency, *duration, read(two))
	report(readTwo, readOne, "")
	createOne := load("POST /v1/runs (plan_only), 1 replica", *concurrency, *duration, create(one))
	report(createOne, result{}, "")
	createTwo := load("POST /v1/runs (plan_only), 2 replicas", *concurrency, *duration, create(two))
	report(createTwo, createOne, "")
	fmt.Printf("two replicas vs one on %d CPUs: read throughput x%.2f, run creation throughput x%.2f\n\n",
		numCPU(), readTwo.rps()/readOne.rps(), createTwo.rps()/createOne.rps())
	// A ratio of refusals is no measurement: the phase fails instead.
	for _, r := range []result{readOne, readTwo, createOne, createTwo} {
		if r.errors > 0 {
			return fmt.Errorf("%s: %d calls failed", r.name, r.errors)
		}
	}
	return nil
}

// cancelRuns cancels the runs of ids through /v1, eight at a time.
func cancelRuns(client *http.Client, apiURL, token string, ids []string) error {
	var failed atomic.Int64
	work := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				if status := call(client, http.MethodPost, apiURL+"/v1/runs/"+id+"/actions/cancel", token, map[string]string{},
					map[string]any{"Idempotency-Key": "bench-cancel-" + id}, nil); status != http.StatusOK {
					failed.Add(1)
				}
			}
		}()
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("%d of %d cancellations failed", n, len(ids))
	}
	return nil
}

func uploadConfiguration(client *http.Client, apiURL, token, workspaceID string) (string, error) {
	body := devstack.TarGz(map[string]string{"main.tf": `resource "terraform_data" "x" { input = "bench" }`})
	req, _ := http.NewRequest(http.MethodPost, apiURL+"/v1/workspaces/"+workspaceID+"/configuration-versions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/gzip")
	req.Header.Set("Cookie", "__Secure-identity.session_token="+token)
	req.Header.Set("Idempotency-Key", fmt.Sprintf("bench-cfg-%s-%d", workspaceID, time.Now().UnixNano()))
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("uploading configuration: %d", resp.StatusCode)
	}
	return out.Data.ID, nil
}

// benchLogReads writes the same large log into two runs, one kept in table
// rows and one sealed into blob segments, and reads both as the dashboard
// (/v1 pages of 100 chunks) and the CLI (/api/v2 64 KiB windows) do, from
// random positions. The log is written in this process with the run
// service the worker uses, into the API's own database and blob directory.
func benchLogReads(client *http.Client, api *apiProcess, dbURL, token, userToken string, workspaceIDs []string, logBytes int) error {
	conn, err := db.OpenPool(dbURL, 4)
	if err != nil {
		return err
	}
	defer conn.Close()
	runs := map[string]string{}
	for i, where := range []string{"table", "blob"} {
		segment := "67108864" // a log under 64 MiB stays in table rows
		if where == "blob" {
			segment = "1048576"
		}
		cfg, err := config.LoadFrom(map[string]string{
			"DATABASE_URL": dbURL, "AUTH_SECRET": "bench-auth-secret-0123456789abcdef0123456789abcdef",
			"CAIRN_MASTER_KEY": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", "IDEMPOTENCY_HMAC_KEY": "HyAhIiMkJSYnKCkqKywtLi8wMTIzNDU2Nzg5Ojs8PT4=",
			"CAIRN_DATA_DIR": api.DataDir, "CAIRN_LOG_SEGMENT_BYTES": segment,
		})
		if err != nil {
			return err
		}
		deps, err := assembly.Assemble(cfg, conn, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			return err
		}
		ws := workspaceIDs[len(workspaceIDs)-1-i]
		cv, err := uploadConfiguration(client, api.URL, token, ws)
		if err != nil {
			return err
		}
		var runID string
		if st := call(client, http.MethodPost, api.URL+"/v1/runs", token, map[string]string{"workspace_id": ws,
			"configuration_version_id": cv, "kind": "plan_only", "message": "log bench"},
			map[string]any{"Idempotency-Key": "bench-log-run-" + where}, &runID); st != http.StatusCreated {
			return fmt.Errorf("creating log run: %d", st)
		}
		sink, err := deps.Services.Runs.NewLogSink(context.Background(), runID, cairnrun.PhasePlan, nil)
		if err != nil {
			return err
		}
		line := []byte(strings.Repeat("terraform_data.item: Refreshing state... ", 2) + "\n")
		for written := 0; written < logBytes; written += len(line) {
			_, _ = sink.Write(line)
			if written%(256<<10) < len(line) {
				if err := sink.Flush(context.Background(), false); err != nil {
					return err
				}
			}
		}
		if err := sink.Flush(context.Background(), true); err != nil {
			return err
		}
		runs[where] = runID
	}
	var lastSeq int64
	if err := conn.Get(&lastSeq, `SELECT max(last_sequence) FROM run_log_segments WHERE run_id = $1`, runs["blob"]); err != nil {
		return fmt.Errorf("the blob run has no segments: %w", err)
	}
	fmt.Printf("log of %d MiB per run (%d chunks)\n", logBytes>>20, lastSeq)
	var tablePage, tableWindow result
	for _, where := range []string{"table", "blob"} {
		runID := runs[where]
		page := load("GET /v1/runs/{id}/logs?after=…&limit=100, "+where, *concurrency, *duration, func(int, int) bool {
			after := rand.Int64N(lastSeq)
			return call(client, http.MethodGet, fmt.Sprintf("%s/v1/runs/%s/logs?after=%d&limit=100", api.URL, runID, after), token, nil, nil, nil) == http.StatusOK
		})
		logURL, err := planLogURL(client, api.URL, userToken, runID)
		if err != nil {
			return err
		}
		window := load("GET /api/v2 plan log, 64 KiB window, "+where, *concurrency, *duration, func(int, int) bool {
			req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s?offset=%d&limit=65536", logURL, rand.IntN(logBytes)), nil)
			resp, err := client.Do(req)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			n, _ := io.Copy(io.Discard, resp.Body)
			return resp.StatusCode == http.StatusOK && n > 0
		})
		if where == "table" {
			tablePage, tableWindow = page, window
			report(page, result{}, "")
			report(window, result{}, "")
		} else {
			report(page, tablePage, "")
			report(window, tableWindow, "")
		}
	}
	fmt.Println()
	return nil
}

// planLogURL reads a run's signed plan log URL as the CLI does.
func planLogURL(client *http.Client, apiURL, userToken, runID string) (string, error) {
	req, _ := http.NewRequest(http.MethodGet, apiURL+"/api/v2/plans/plan_"+strings.TrimPrefix(runID, "run_"), nil)
	req.Header.Set("Authorization", "Bearer "+userToken)
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var doc struct {
		Data struct {
			Attributes struct {
				LogReadURL string `json:"log-read-url"`
			} `json:"attributes"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || doc.Data.Attributes.LogReadURL == "" {
		return "", fmt.Errorf("reading the plan's log URL: %d", resp.StatusCode)
	}
	return doc.Data.Attributes.LogReadURL, nil
}
