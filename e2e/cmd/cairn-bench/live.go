package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/cairnhq/cairn/e2e/devstack"
)

// liveViewers is how many dashboard sockets watch one run.
const liveViewers = 500

// benchLive measures the live channel at scale: liveViewers WebSockets to
// the real dashboard watch one queued run (no worker takes it) while this
// harness writes log chunks the way a runner does. It reports the API
// requests per second the dashboard makes while the run is idle and while
// it logs, and the latency from a chunk's commit to its arrival at every
// socket.
func benchLive(api *apiProcess, dbURL, session, workspaceID string) error {
	base, stopBFF, err := startBFF(dbURL, api, devstack.TLSFiles{})
	if err != nil {
		return err
	}
	defer stopBFF()
	c := api.Client
	var cfg, created struct{ ID string }
	if _, err := v1(c, http.MethodPost, api.URL+"/v1/workspaces/"+workspaceID+"/configuration-versions", session,
		devstack.TarGz(map[string]string{"main.tf": `resource "terraform_data" "x" {}`}), "application/gzip", &cfg); err != nil {
		return err
	}
	if st, err := v1(c, http.MethodPost, api.URL+"/v1/runs", session, jsonBody(map[string]string{"workspace_id": workspaceID,
		"configuration_version_id": cfg.ID, "kind": "plan_only"}), "application/json", &created); err != nil || created.ID == "" {
		return fmt.Errorf("creating the watched run: %d %v", st, err)
	}
	browser, err := dashboardSession(base, "bench@example.com")
	if err != nil {
		return err
	}
	browser.Transport = &http.Transport{MaxIdleConnsPerHost: liveViewers, MaxConnsPerHost: 0}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var (
		mu        sync.Mutex
		latencies []float64
		received  atomic.Int64
		wg        sync.WaitGroup
	)
	liveURL := strings.Replace(base, "http", "ws", 1) + "/live/runs/" + created.ID
	conns := make([]*websocket.Conn, 0, liveViewers)
	for range liveViewers {
		conn, _, err := websocket.Dial(ctx, liveURL, &websocket.DialOptions{HTTPClient: browser, HTTPHeader: http.Header{"Origin": {base}}})
		if err != nil {
			return fmt.Errorf("opening socket %d: %w", len(conns)+1, err)
		}
		conns = append(conns, conn)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var ev struct {
					Type      string     `json:"type"`
					CreatedAt *time.Time `json:"created_at"`
				}
				if err := wsjson.Read(ctx, conn, &ev); err != nil {
					return
				}
				if ev.Type == "log" && ev.CreatedAt != nil {
					d := ms64(time.Since(*ev.CreatedAt))
					received.Add(1)
					mu.Lock()
					latencies = append(latencies, d)
					mu.Unlock()
				}
			}
		}()
	}
	defer func() {
		for _, conn := range conns {
			conn.CloseNow()
		}
		cancel()
		wg.Wait()
	}()

	window := *duration
	time.Sleep(time.Second)
	before, err := apiRequests(api)
	if err != nil {
		return err
	}
	time.Sleep(window)
	after, err := apiRequests(api)
	if err != nil {
		return err
	}
	idle := float64(after-before) / window.Seconds()

	db, err := sql.Open("postgres", dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	const chunksPerSecond = 20
	before = after
	start, written := time.Now(), 0
	for seq := 1; time.Since(start) < window; seq++ {
		if _, err := db.Exec(`INSERT INTO run_log_chunks (run_id, sequence, phase, body) VALUES ($1, $2, 'plan', $3)`,
			created.ID, seq, fmt.Sprintf("line %d of the plan\n", seq)); err != nil {
			return err
		}
		written++
		time.Sleep(time.Second / chunksPerSecond)
	}
	elapsed := time.Since(start)
	for deadline := time.Now().Add(10 * time.Second); received.Load() < int64(written*liveViewers) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	after, err = apiRequests(api)
	if err != nil {
		return err
	}
	logging := float64(after-before) / elapsed.Seconds()
	mu.Lock()
	defer mu.Unlock()
	fmt.Printf("live channel, %d sockets watching one run:\n", liveViewers)
	fmt.Printf("  API requests/s from the dashboard, run idle          %8.1f  (polling every 200 ms per socket: ~%d)\n", idle, liveViewers*5*2)
	fmt.Printf("  API requests/s while the run logs %d chunks/s        %8.1f\n", chunksPerSecond, logging)
	fmt.Printf("  chunk commit -> socket, %d of %d deliveries: p50 %.1f ms, p99 %.1f ms [target p99 < 500 ms]\n",
		len(latencies), written*liveViewers, percentile(latencies, 0.5), percentile(latencies, 0.99))
	return nil
}

// apiRequests is the API's count of answered requests so far (its own
// metrics endpoint excluded). A scrape is tried twice: the database
// collector bounds its queries and may fail one under load.
func apiRequests(api *apiProcess) (int64, error) {
	n, err := scrapeRequests(api)
	if err != nil {
		time.Sleep(200 * time.Millisecond)
		n, err = scrapeRequests(api)
	}
	return n, err
}

func scrapeRequests(api *apiProcess) (int64, error) {
	req, _ := http.NewRequest(http.MethodGet, api.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+benchOperatorToken)
	resp, err := api.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		head, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return 0, fmt.Errorf("metrics: %d %s", resp.StatusCode, head)
	}
	var total float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "cairn_http_requests_total{") || strings.Contains(line, `route="/metrics"`) {
			continue
		}
		n, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			total += n
		}
	}
	return int64(total), sc.Err()
}
