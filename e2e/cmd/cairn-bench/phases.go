package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// The phases of the table in main.go that wrap measurements written
// before the table: each takes what it needs from the bench.

func benchHealth(_ context.Context, b *bench) error {
	baseline := b.baseline()
	health := load("GET /health (no auth, no database)", *concurrency, *duration, func(int, int) bool {
		return call(b.client, http.MethodGet, b.apiURL+"/health", "", nil, nil, nil) == http.StatusOK
	})
	report(health, baseline, "")
	return nil
}

func benchMutation(_ context.Context, b *bench) error {
	baseline, err := b.databaseBaseline()
	if err != nil {
		return err
	}
	mutation := load("POST /v1/projects (session, idempotent)", *concurrency, *duration, func(w, i int) bool {
		name := fmt.Sprintf("p-%d-%d-%d", w, i, time.Now().UnixNano())
		return call(b.client, http.MethodPost, b.apiURL+"/v1/projects", b.session, map[string]string{"name": name},
			map[string]any{"Idempotency-Key": "k-" + name}, nil) == http.StatusCreated
	})
	report(mutation, baseline, "p99 < 20 ms")
	return nil
}

func benchReplay(_ context.Context, b *bench) error {
	baseline, err := b.databaseBaseline()
	if err != nil {
		return err
	}
	// Each client replays its own key: replays of one key by many clients
	// at once would measure IDEMPOTENCY_IN_PROGRESS answers.
	for w := range *concurrency {
		call(b.client, http.MethodPost, b.apiURL+"/v1/projects", b.session, map[string]string{"name": fmt.Sprintf("replayed-%d", w)},
			map[string]any{"Idempotency-Key": fmt.Sprintf("replay-%d", w)}, nil)
	}
	replay := load("POST /v1/projects replay (same key)", *concurrency, *duration, func(w, _ int) bool {
		return call(b.client, http.MethodPost, b.apiURL+"/v1/projects", b.session, map[string]string{"name": fmt.Sprintf("replayed-%d", w)},
			map[string]any{"Idempotency-Key": fmt.Sprintf("replay-%d", w)}, nil) == http.StatusCreated
	})
	report(replay, baseline, "")
	return nil
}

func benchList(_ context.Context, b *bench) error {
	b.workspaceList()
	return nil
}

func benchAgentsPhase(_ context.Context, b *bench) error {
	return benchAgents(b.client, b.apiURL, b.session, b.workspaceList())
}

func benchLivePhase(_ context.Context, b *bench) error {
	var workspaceID string
	if status := call(b.client, http.MethodPost, b.apiURL+"/v1/workspaces", b.session, map[string]any{"project_id": b.projectID,
		"name": "live", "execution_settings": map[string]string{"tool_version": "1.10.6", "region": "us", "platform": "linux_amd64"}},
		map[string]any{"Idempotency-Key": "bench-ws-live"}, &workspaceID); status != http.StatusCreated {
		return fmt.Errorf("creating the live workspace: %d", status)
	}
	return benchLive(b.api, b.dbURL, b.session, workspaceID)
}

func benchTeamsPhase(_ context.Context, b *bench) error {
	return benchTeams(b.client, b.apiURL, b.dbURL, b.session, b.workspaceIDs[0])
}

func benchVarsetsPhase(_ context.Context, b *bench) error {
	return benchVarsets(b.api, b.dbURL, b.session)
}

func benchSCIMPhase(_ context.Context, b *bench) error { return benchSCIM(b.client, b.apiURL, b.dbURL) }

func benchReplicasPhase(_ context.Context, b *bench) error {
	return benchReplicas(b.client, b.api, b.dbURL, b.session, b.workspaceIDs[:40])
}

func benchLogsPhase(_ context.Context, b *bench) error {
	token, err := b.apiToken()
	if err != nil {
		return err
	}
	// Never below 3 MiB: the blob-backed log needs more than its 1 MiB
	// segment to have segments at all.
	return benchLogReads(b.client, b.api, b.dbURL, b.session, token, b.workspaceIDs[40:], max(sized(*logMiB<<20), 3<<20))
}

func benchStatePhase(_ context.Context, b *bench) error {
	token, err := b.apiToken()
	if err != nil {
		return err
	}
	return benchStateTransfer(b.api, token, "bench", b.baseURL)
}

func benchRunsPhase(ctx context.Context, b *bench) error { return benchRuns(ctx, b.dbURL, *rounds) }

func benchProvidersPhase(ctx context.Context, b *bench) error {
	return benchProviderInit(ctx, b.dbURL, *rounds)
}

func benchCodeHostPhase(_ context.Context, b *bench) error { return benchCodeHost(b.dbURL, *rounds) }

func benchCredentialsPhase(_ context.Context, b *bench) error {
	return benchCredentials(b.dbURL, *rounds)
}

func benchDashboardPhase(_ context.Context, b *bench) error { return benchDashboard(b.dbURL, *rounds) }

func benchPolicyPhase(ctx context.Context, b *bench) error {
	baseline, err := benchPolicyEvaluation(*rounds)
	if err != nil {
		return err
	}
	if err := benchPolicyEvaluator(ctx, b.dbURL, *rounds, baseline); err != nil {
		return err
	}
	return benchPolicyBuild(b.dbURL, *rounds)
}

// benchStateModePhase is state mode (the CLI runs, Cairn keeps the state)
// for OpenTofu and Terraform against an HTTPS API, as the CLIs require.
func benchStateModePhase(ctx context.Context, b *bench) error {
	token, err := b.apiToken()
	if err != nil {
		return err
	}
	tlsAPI, files, stop, err := startTLSAPI(b.dbURL)
	if err != nil {
		return err
	}
	defer stop()
	return benchStateMode(ctx, tlsAPI, files, token, "bench", *rounds)
}

func benchRegistryPhase(ctx context.Context, b *bench) error {
	token, err := b.apiToken()
	if err != nil {
		return err
	}
	tlsAPI, files, stop, err := startTLSAPI(b.dbURL)
	if err != nil {
		return err
	}
	defer stop()
	return benchRegistry(ctx, tlsAPI, files, b.session, token, "bench", *rounds)
}

func benchSSOPhase(_ context.Context, b *bench) error { return benchSSO(b.dbURL) }

// benchSignIn is sign-in cost with the production argon2id parameters (64
// MiB, t=3, p=2): it bounds how many sign-ins a node can take.
func benchSignIn(_ context.Context, b *bench) error {
	for _, n := range []int{1, 4} {
		signIn := load(fmt.Sprintf("POST /api/auth/sign-in/email (argon2id default), %d clients", n), n, *duration, func(int, int) bool {
			return call(b.client, http.MethodPost, b.apiURL+"/api/auth/sign-in/email", "",
				map[string]string{"email": "bench@example.com", "password": "correct horse battery staple"}, nil, nil) == http.StatusOK
		})
		report(signIn, result{}, "")
	}
	return nil
}

// baseline is an empty net/http handler in this process under the same
// load, measured once.
func (b *bench) baseline() result {
	if b.httpBaseline == nil {
		r := load("baseline: empty net/http handler", *concurrency, *duration, func(int, int) bool {
			return call(b.client, http.MethodGet, b.baseURL, "", nil, nil, nil) == http.StatusOK
		})
		report(r, result{}, "")
		b.httpBaseline = &r
	}
	return *b.httpBaseline
}

// databaseBaseline is the same kind of write as a mutation (insert + audit
// row in one committed transaction) straight through database/sql,
// measured once.
func (b *bench) databaseBaseline() (result, error) {
	if b.dbBaseline != nil {
		return *b.dbBaseline, nil
	}
	conn, err := sql.Open("postgres", b.dbURL)
	if err != nil {
		return result{}, err
	}
	conn.SetMaxOpenConns(*concurrency)
	defer conn.Close()
	var orgID string
	if err := conn.QueryRow(`SELECT organization_id FROM projects WHERE id = $1`, b.projectID).Scan(&orgID); err != nil {
		return result{}, err
	}
	r := load("baseline: INSERT+audit INSERT+COMMIT via database/sql", *concurrency, *duration, func(w, i int) bool {
		tx, err := conn.Begin()
		if err != nil {
			return false
		}
		defer tx.Rollback()
		pid := fmt.Sprintf("prj_base%d_%d_%d", w, i, time.Now().UnixNano())
		if _, err := tx.Exec(`INSERT INTO projects (id, organization_id, name, created_by) VALUES ($1, $2, $1, 'bench')`, pid, orgID); err != nil {
			return false
		}
		if _, err := tx.Exec(`INSERT INTO audit_events (id, organization_id, action, actor_type, actor_id) VALUES ($1, $2, 'project.created', 'system', 'bench')`,
			"aud_"+pid, orgID); err != nil {
			return false
		}
		return tx.Commit() == nil
	})
	report(r, result{}, "")
	b.dbBaseline = &r
	return r, nil
}

// workspaceList is GET /v1/workspaces with a session against the empty
// handler, measured once: the list phase reports it and the agents phase
// compares against it.
func (b *bench) workspaceList() result {
	if b.sessionList == nil {
		baseline := b.baseline()
		r := load("GET /v1/workspaces?limit=20 (session)", *concurrency, *duration, func(int, int) bool {
			return call(b.client, http.MethodGet, b.apiURL+"/v1/workspaces?limit=20", b.session, nil, nil, nil) == http.StatusOK
		})
		report(r, baseline, "p99 < 25 ms")
		b.sessionList = &r
	}
	return *b.sessionList
}

// apiToken is a user token of the bench owner for the API and the CLIs,
// created once.
func (b *bench) apiToken() (string, error) {
	if b.userToken != "" {
		return b.userToken, nil
	}
	var out struct {
		Data struct {
			Token string `json:"token"`
		} `json:"data"`
	}
	raw, _ := json.Marshal(map[string]string{"description": "bench"})
	req, _ := http.NewRequest(http.MethodPost, b.apiURL+"/v1/user-tokens", bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Cookie", "__Secure-identity.session_token="+b.session)
	req.Header.Set("Idempotency-Key", "bench-user-token")
	resp, err := b.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Data.Token == "" {
		return "", fmt.Errorf("creating a user token: %d %v", resp.StatusCode, err)
	}
	b.userToken = out.Data.Token
	return b.userToken, nil
}

// tool is an external command (tofu, terraform) bound to ctx: when the
// phase's deadline passes it is killed with its process group, so provider
// plugins go too, and WaitDelay keeps a grandchild holding its output open
// from blocking the wait.
func tool(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// children are the process groups of the servers the bench started
// (cairn-api, cairn-worker, cairn-bff) that have not been stopped.
var children = struct {
	sync.Mutex
	pids map[int]bool
}{pids: map[int]bool{}}

// track records a started server's process group and returns the function
// that forgets it again once the server is stopped.
func track(cmd *exec.Cmd) func() {
	pid := cmd.Process.Pid
	children.Lock()
	children.pids[pid] = true
	children.Unlock()
	return func() {
		children.Lock()
		delete(children.pids, pid)
		children.Unlock()
	}
}

// stopChildren kills every server still running: what a phase that failed
// or overran its deadline did not stop.
func stopChildren() {
	children.Lock()
	defer children.Unlock()
	for pid := range children.pids {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	children.pids = map[int]bool{}
}
