package v1_test

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/e2e/devstack"
)

// canaryWorkspace returns a workspace of u's organization that launch
// control admits (an exact canary pair), so runs can be created in it.
func canaryWorkspace(t *testing.T, env *apitest.Env, u *apitest.User) ws {
	t.Helper()
	w := newWorkspace(t, u, newProject(t, u, "P"), "runs")
	current, err := env.Server.V1Services().Launch.Current(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c, version := launch.Default(), 0
	if current != nil {
		c, version = *current, current.Version
	}
	c.CanaryAllowlist = append(c.CanaryAllowlist, launch.Pair{OrganizationID: u.OrganizationID, WorkspaceID: w.ID})
	applyControl(t, env, "canary-"+w.ID, version, c)
	return w
}

// queuedRun uploads a configuration and creates a plan-and-apply run that
// stays queued (no worker runs here).
func queuedRun(t *testing.T, u *apitest.User, workspaceID string) string {
	t.Helper()
	var cv struct{ ID string }
	u.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/workspaces/" + workspaceID + "/configuration-versions",
		Body:   devstack.TarGz(map[string]string{"main.tf": `resource "terraform_data" "a" {}`}),
		Header: map[string]string{"Content-Type": "application/gzip", "Idempotency-Key": apitest.NewKey()}}).
		MustStatus(t, http.StatusCreated).Data(t, &cv)
	var r struct{ ID string }
	u.Mutate(http.MethodPost, "/v1/runs", map[string]string{"workspace_id": workspaceID, "configuration_version_id": cv.ID,
		"kind": "plan_and_apply"}).MustStatus(t, http.StatusCreated).Data(t, &r)
	return r.ID
}

func keyed(key string) map[string]string { return map[string]string{"Idempotency-Key": key} }

// mustReuse fails unless resp is the key-reuse conflict.
func mustReuse(t *testing.T, what string, resp *apitest.Response) {
	t.Helper()
	if resp.Status != http.StatusConflict || resp.Code() != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("%s with a key already used on another resource: %d %s, want 409 IDEMPOTENCY_KEY_REUSED", what, resp.Status, resp.Body)
	}
}

// TestOneKeyNeverActsOnTwoResources: a key binds the resolved path, not
// just the route template. Reusing it on a second resource is refused and
// that resource is untouched.
func TestOneKeyNeverActsOnTwoResources(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Binder")
	w := canaryWorkspace(t, env, u)

	t.Run("delete", func(t *testing.T) {
		var a, b struct{ ID string }
		for name, v := range map[string]*struct{ ID string }{"a": &a, "b": &b} {
			u.Mutate(http.MethodPost, "/v1/workspaces/"+w.ID+"/variables", map[string]any{"key": name,
				"value": "v", "sensitive": false}).MustStatus(t, http.StatusCreated).Data(t, v)
		}
		key := apitest.NewKey()
		u.Do(apitest.Request{Method: http.MethodDelete, Path: "/v1/workspace-variables/" + a.ID, Header: keyed(key)}).MustStatus(t, http.StatusOK)
		mustReuse(t, "delete", u.Do(apitest.Request{Method: http.MethodDelete, Path: "/v1/workspace-variables/" + b.ID, Header: keyed(key)}))
		var left []struct{ ID string }
		u.Get("/v1/workspaces/"+w.ID+"/variables").MustStatus(t, http.StatusOK).Data(t, &left)
		if len(left) != 1 || left[0].ID != b.ID {
			t.Fatalf("variables after the refused delete: %+v, want only %s", left, b.ID)
		}
		// The same key on the same resource is still a replay.
		resp := u.Do(apitest.Request{Method: http.MethodDelete, Path: "/v1/workspace-variables/" + a.ID, Header: keyed(key)}).MustStatus(t, http.StatusOK)
		if resp.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatal("retrying the first delete was not a replay")
		}
	})

	t.Run("cancel", func(t *testing.T) {
		a, b := queuedRun(t, u, w.ID), queuedRun(t, u, w.ID)
		key := apitest.NewKey()
		u.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/runs/" + a + "/actions/cancel", Header: keyed(key)}).MustStatus(t, http.StatusOK)
		mustReuse(t, "cancel", u.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/runs/" + b + "/actions/cancel", Header: keyed(key)}))
		var run struct{ Status string }
		u.Get("/v1/runs/"+b).MustStatus(t, http.StatusOK).Data(t, &run)
		if run.Status == "canceled" {
			t.Fatal("the second run was canceled under the first run's key")
		}
		if n := countRows(t, env, `SELECT count(*) FROM audit_events WHERE target_id = $1 AND action LIKE 'run.cancel%'`, b); n != 0 {
			t.Fatalf("%d cancel events for the untouched run", n)
		}
	})

	t.Run("revoke", func(t *testing.T) {
		var sa struct{ ID string }
		u.Mutate(http.MethodPost, "/v1/service-accounts", map[string]string{"name": "deployer"}).MustStatus(t, http.StatusCreated).Data(t, &sa)
		tokens := "/v1/service-accounts/" + sa.ID + "/tokens"
		var a, b struct{ ID, Token string }
		for _, tok := range []*struct{ ID, Token string }{&a, &b} {
			u.Mutate(http.MethodPost, tokens, map[string]any{"permissions": []string{"state:read"},
				"expires_at": time.Now().Add(time.Hour)}).MustStatus(t, http.StatusCreated).Data(t, tok)
		}
		key := apitest.NewKey()
		u.Do(apitest.Request{Method: http.MethodDelete, Path: tokens + "/" + a.ID, Header: keyed(key)}).MustStatus(t, http.StatusOK)
		mustReuse(t, "revoke", u.Do(apitest.Request{Method: http.MethodDelete, Path: tokens + "/" + b.ID, Header: keyed(key)}))
		if _, err := env.Server.V1Services().ServiceAccounts.Authenticate(context.Background(), b.Token); err != nil {
			t.Fatalf("the second token stopped working: %v", err)
		}

		var ua, ub struct{ ID, Token string }
		for _, tok := range []*struct{ ID, Token string }{&ua, &ub} {
			u.Mutate(http.MethodPost, "/v1/user-tokens", map[string]string{"description": "cli"}).MustStatus(t, http.StatusCreated).Data(t, tok)
		}
		key = apitest.NewKey()
		u.Do(apitest.Request{Method: http.MethodDelete, Path: "/v1/user-tokens/" + ua.ID, Header: keyed(key)}).MustStatus(t, http.StatusOK)
		mustReuse(t, "user token revoke", u.Do(apitest.Request{Method: http.MethodDelete, Path: "/v1/user-tokens/" + ub.ID, Header: keyed(key)}))
		if n := countRows(t, env, `SELECT count(*) FROM user_tokens WHERE id = $1 AND revoked_at IS NULL`, ub.ID); n != 1 {
			t.Fatal("the second user token was revoked under the first token's key")
		}
	})

	t.Run("query", func(t *testing.T) {
		// Another query string is other input too, even where the handler
		// reads none of it.
		key := apitest.NewKey()
		u.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/projects", Body: map[string]string{"name": "q"}, Header: keyed(key)}).
			MustStatus(t, http.StatusCreated)
		mustReuse(t, "create with a query", u.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/projects?dry_run=true",
			Body: map[string]string{"name": "q"}, Header: keyed(key)}))
	})
}

// recoverable puts a queued run where recovery is the only way forward,
// as a lost apply would.
func recoverable(t *testing.T, env *apitest.Env, u *apitest.User, workspaceID string) string {
	t.Helper()
	id := queuedRun(t, u, workspaceID)
	if _, err := env.DB.Exec(`UPDATE runs SET status = 'recovery_required', plan_status = 'finished', apply_status = 'interrupted'
		WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	return id
}

var recoverBody = map[string]any{"resolution": "current_state_verified", "current_state_version_id": nil,
	"current_state_digest": "", "reason": "the apply never started", "confirm_fence_advance": true}

// TestRecoverIsIdempotent: recovery needs a key like every mutation, and a
// retry after success returns the first answer instead of a conflict.
func TestRecoverIsIdempotent(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Recoverer")
	w := canaryWorkspace(t, env, u)
	id := recoverable(t, env, u, w.ID)
	path := "/v1/runs/" + id + "/actions/recover"

	resp := u.Do(apitest.Request{Method: http.MethodPost, Path: path, Body: recoverBody})
	if resp.Status != http.StatusBadRequest || resp.Code() != "IDEMPOTENCY_KEY_REQUIRED" {
		t.Fatalf("recover without a key: %d %s", resp.Status, resp.Body)
	}
	if n := countRows(t, env, `SELECT count(*) FROM run_recoveries WHERE run_id = $1`, id); n != 0 {
		t.Fatal("a keyless recover prepared a recovery")
	}

	key := apitest.NewKey()
	first := u.Do(apitest.Request{Method: http.MethodPost, Path: path, Body: recoverBody, Header: keyed(key)}).MustStatus(t, http.StatusOK)
	var recovered struct {
		Status         string  `json:"status"`
		LeaseExpiresAt *string `json:"lease_expires_at"`
	}
	first.Data(t, &recovered)
	if recovered.Status != "recovered" || recovered.LeaseExpiresAt != nil {
		t.Fatalf("first answer %s", first.Body)
	}
	retry := u.Do(apitest.Request{Method: http.MethodPost, Path: path, Body: recoverBody, Header: keyed(key)}).MustStatus(t, http.StatusOK)
	data1, id1 := envelopeParts(t, first.Body)
	data2, id2 := envelopeParts(t, retry.Body)
	if !bytes.Equal(data1, data2) || id1 == id2 || retry.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry is not the first answer:\n%s\n%s", first.Body, retry.Body)
	}
	if n := countRows(t, env, `SELECT count(*) FROM audit_events WHERE target_id = $1 AND action = 'run.recovered'`, id); n != 1 {
		t.Fatalf("%d run.recovered events, want 1", n)
	}
	// The key is bound to this run: another run in recovery is untouched.
	other := recoverable(t, env, u, w.ID)
	mustReuse(t, "recover", u.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/runs/" + other + "/actions/recover",
		Body: recoverBody, Header: keyed(key)}))
	var run struct{ Status string }
	u.Get("/v1/runs/"+other).MustStatus(t, http.StatusOK).Data(t, &run)
	if run.Status != "recovery_required" {
		t.Fatalf("the other run is %s", run.Status)
	}
	// Without the key a second recovery is what it always was: not allowed.
	if resp := u.Mutate(http.MethodPost, path, recoverBody); resp.Code() != "RUN_ACTION_NOT_ALLOWED" {
		t.Fatalf("recovering a recovered run under a new key: %d %s", resp.Status, resp.Body)
	}
}

// holdRow locks one row in a transaction of the test's own, so that a
// mutation needing it waits inside its transaction, with its key
// reserved, until release.
func holdRow(t *testing.T, env *apitest.Env, query string, args ...any) (release func()) {
	t.Helper()
	tx, err := env.DB.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(query, args...); err != nil {
		_ = tx.Rollback()
		t.Fatal(err)
	}
	released := false
	release = func() {
		if !released {
			released = true
			_ = tx.Rollback()
		}
	}
	t.Cleanup(release)
	return release
}

// waitUntilBlocked returns once some backend of the test's database waits
// for a lock: the first request is then inside its transaction.
func waitUntilBlocked(t *testing.T, env *apitest.Env) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var waiting int
		if err := env.DB.Get(&waiting, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the first request never reached its transaction")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRetryWhileTheFirstIsRunningIsInProgress observes
// IDEMPOTENCY_IN_PROGRESS on each of the three paths a key is reserved
// on: the common mutation, a streamed upload and the multi-transaction
// recovery. The first request is held inside its transaction by a row
// lock the test owns; the retry comes while it waits, and after release
// the first completes and a later retry replays it.
func TestRetryWhileTheFirstIsRunningIsInProgress(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Impatient")
	w := canaryWorkspace(t, env, u)
	var set struct{ ID string }
	u.Mutate(http.MethodPost, "/v1/policy-sets", map[string]string{"name": "tags"}).MustStatus(t, http.StatusCreated).Data(t, &set)
	stuck := recoverable(t, env, u, w.ID)

	for _, tc := range []struct {
		name, lock string
		lockArgs   []any
		request    apitest.Request
		status     int
	}{
		{"mutation", `SELECT 1 FROM workspaces WHERE id = $1 FOR UPDATE`, []any{w.ID},
			apitest.Request{Method: http.MethodPost, Path: "/v1/workspaces/" + w.ID + "/variables",
				Body: map[string]any{"key": "slow", "value": "v", "sensitive": false}}, http.StatusCreated},
		{"upload", `SELECT 1 FROM workspaces WHERE id = $1 FOR UPDATE`, []any{w.ID},
			apitest.Request{Method: http.MethodPost, Path: "/v1/workspaces/" + w.ID + "/policy-sets/" + set.ID + "/versions",
				Body: corpusArchive(t, "require-tags"), Header: map[string]string{"Content-Type": "application/gzip"}}, http.StatusAccepted},
		{"recover", `SELECT 1 FROM runs WHERE id = $1 FOR UPDATE`, []any{stuck},
			apitest.Request{Method: http.MethodPost, Path: "/v1/runs/" + stuck + "/actions/recover", Body: recoverBody}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := apitest.NewKey()
			withKey := func() apitest.Request {
				r := tc.request
				r.Header = map[string]string{"Idempotency-Key": key}
				for k, v := range tc.request.Header {
					r.Header[k] = v
				}
				if b, ok := r.Body.([]byte); ok {
					r.Body = bytes.NewReader(b)
				}
				return r
			}
			release := holdRow(t, env, tc.lock, tc.lockArgs...)
			firstDone := make(chan *apitest.Response, 1)
			go func() { firstDone <- u.Do(withKey()) }()
			waitUntilBlocked(t, env)

			retry := u.Do(withKey())
			if retry.Status != http.StatusConflict || retry.Code() != "IDEMPOTENCY_IN_PROGRESS" {
				t.Fatalf("retry while the first waits: %d %s", retry.Status, retry.Body)
			}
			release()
			first := <-firstDone
			first.MustStatus(t, tc.status)
			replay := u.Do(withKey()).MustStatus(t, tc.status)
			data1, _ := envelopeParts(t, first.Body)
			data2, _ := envelopeParts(t, replay.Body)
			if replay.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(data1, data2) {
				t.Fatalf("retry after the first finished is not its answer:\n%s\n%s", first.Body, replay.Body)
			}
		})
	}
}

// mutatingOperations are a path's operations with state-changing methods.
func mutatingOperations(item *huma.PathItem) map[string]*huma.Operation {
	ops := map[string]*huma.Operation{}
	for method, op := range map[string]*huma.Operation{http.MethodPost: item.Post, http.MethodPut: item.Put,
		http.MethodPatch: item.Patch, http.MethodDelete: item.Delete} {
		if op != nil {
			ops[method] = op
		}
	}
	return ops
}

// fiberPath writes an OpenAPI path template the way Fiber names routes.
func fiberPath(template string) string {
	return regexp.MustCompile(`\{([^}]+)\}`).ReplaceAllString(template, ":$1")
}

// TestEveryMutationRequiresAKey enumerates the API's operations: every
// state-changing one declares a required Idempotency-Key and refuses a
// request without one before doing anything. A route added without the
// key fails here. The code host's webhook receiver (SPEC §6: its replay
// identity is the signed delivery ID) and the restricted downloads are the
// exceptions.
func TestEveryMutationRequiresAKey(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Enumerator")
	// Restricted downloads change nothing but the audit log and take no
	// key (SPEC §4 rule 3); their refusals are tested in api/run.
	exempt := map[string]bool{"POST /v1/github/webhooks": true,
		"POST /v1/runs/{id}/downloads/plan": true, "POST /v1/runs/{id}/downloads/plan-json": true,
		"POST /v1/runs/{id}/downloads/emergency-state": true, "POST /v1/state-versions/{id}/download": true}

	doc := env.Server.V1.Huma().OpenAPI()
	mutations := 0
	for path, item := range doc.Paths {
		for method, operation := range mutatingOperations(item) {
			if exempt[method+" "+path] {
				continue
			}
			mutations++
			required := false
			for _, p := range operation.Parameters {
				if p.In == "header" && p.Name == "Idempotency-Key" {
					required = p.Required
				}
			}
			if !required {
				t.Errorf("%s %s (%s) does not declare a required Idempotency-Key", method, path, operation.OperationID)
			}
			concrete := path
			for _, p := range operation.Parameters {
				if p.In == "path" {
					concrete = strings.ReplaceAll(concrete, "{"+p.Name+"}", "x_missing")
				}
			}
			for _, header := range []map[string]string{nil, {"Idempotency-Key": "has space"}} {
				resp := u.Do(apitest.Request{Method: method, Path: concrete, Body: []byte(`{}`), Header: header})
				want := "IDEMPOTENCY_KEY_REQUIRED"
				if header != nil {
					want = "IDEMPOTENCY_KEY_INVALID"
				}
				if resp.Status != http.StatusBadRequest || resp.Code() != want {
					t.Errorf("%s %s with key %q: %d %s, want 400 %s", method, concrete, header["Idempotency-Key"], resp.Status, resp.Body, want)
				}
			}
		}
		// Safe methods never demand a key.
		if item.Get != nil {
			for _, p := range item.Get.Parameters {
				if p.Name == "Idempotency-Key" && p.Required {
					t.Errorf("GET %s requires an Idempotency-Key", path)
				}
			}
		}
	}
	if mutations < 25 {
		t.Fatalf("only %d mutating operations found; the enumeration is broken", mutations)
	}

	// No state-changing /v1 route may live outside the contract (a raw
	// Fiber handler would skip every check above).
	documented := map[string]bool{}
	for path, item := range doc.Paths {
		for method := range mutatingOperations(item) {
			documented[method+" "+fiberPath(path)] = true
		}
	}
	for _, r := range env.Server.App.GetRoutes(true) {
		if !strings.HasPrefix(r.Path, "/v1/") {
			continue
		}
		switch r.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			if !documented[r.Method+" "+r.Path] {
				t.Errorf("%s %s changes state outside the /v1 contract", r.Method, r.Path)
			}
		}
	}
}
