package tfe_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/plandiff/plandifftest"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/run/runtest"
)

// bigPlanJSON is a valid one-resource plan padded past what a connection
// buffers (the padding sits in a section readers skip), so a client that
// stops reading after the headers holds the server mid-body.
func bigPlanJSON(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := plandifftest.PlanJSON(&buf, 1); err != nil {
		t.Fatal(err)
	}
	pad := `{"padding":"` + strings.Repeat("p", 24<<20) + `",`
	return append([]byte(pad), buf.Bytes()[1:]...)
}

// plannedRun creates a workspace and a run through /api/v2 and plans the
// run as a worker would, sealing the artifacts given.
func (u *cloudUser) plannedRun(t *testing.T, workspace string, artifacts map[string][]byte) run.Run {
	t.Helper()
	runs := u.env.Server.Services().Runs
	r, err := runs.RunOwner(context.Background(), u.newRun(t, u.uploadedWorkspace(t, workspace)))
	if err != nil {
		t.Fatal(err)
	}
	return runtest.PlanArtifacts(t, u.env, runs, r, artifacts)
}

var accounts atomic.Int64

// serviceToken issues a token of a new service account with the
// permissions given, bounded to workspaceID when it is not empty.
func (u *cloudUser) serviceToken(t *testing.T, workspaceID string, permissions ...string) (accountID, token string) {
	t.Helper()
	var sa struct{ ID string }
	u.Mutate(http.MethodPost, "/v1/service-accounts", map[string]string{"name": fmt.Sprintf("account %d", accounts.Add(1))}).
		MustStatus(t, http.StatusCreated).Data(t, &sa)
	body := map[string]any{"permissions": permissions, "expires_at": time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)}
	if workspaceID != "" {
		body["workspace_id"] = workspaceID
	}
	var issued struct{ Token string }
	u.Mutate(http.MethodPost, "/v1/service-accounts/"+sa.ID+"/tokens", body).MustStatus(t, http.StatusCreated).Data(t, &issued)
	return sa.ID, issued.Token
}

func planPath(r run.Run, export string) string {
	return "/api/v2/plans/plan_" + strings.TrimPrefix(r.ID, "run_") + "/" + export
}

// openStream sends a GET and returns the response once its headers are
// read, its body not yet.
func openStream(t *testing.T, env *apitest.Env, token, path string) *http.Response {
	t.Helper()
	resp, err := dialGet(t, env, token, path)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func dialGet(t *testing.T, env *apitest.Env, token, path string) (*http.Response, error) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(env.URL, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer %s\r\n\r\n", path, token)
	return http.ReadResponse(bufio.NewReader(conn), nil)
}

// brokenOff asserts that a GET of path never ends as a complete body: the
// connection closes before the headers (a body small enough to be
// buffered whole is dropped with them) or in the middle of the body,
// short of its declared length.
func brokenOff(t *testing.T, env *apitest.Env, token, path string) {
	t.Helper()
	resp, err := dialGet(t, env, token, path)
	if err != nil {
		if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			t.Fatalf("reading the response: %v", err)
		}
		return
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	got, err := io.ReadAll(resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) || int64(len(got)) >= resp.ContentLength {
		t.Fatalf("read %d of %d bytes, %v: want a body broken off short", len(got), resp.ContentLength, err)
	}
}

// auditCount counts the audit events of action on target by actorID.
func auditCount(t *testing.T, env *apitest.Env, action, targetID, actorID string) int {
	t.Helper()
	var n int
	if err := env.DB.Get(&n, `SELECT count(*) FROM audit_events WHERE action = $1 AND target_id = $2 AND actor_id = $3`,
		action, targetID, actorID); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPlanJSONExportNeedsSensitiveArtifactAccess: json-output releases
// sensitive values, so it needs artifact:read_sensitive inside the
// token's exact boundary (403 without it, a run token included; another
// workspace's plan is the missing plan's 404), and its audit record, the
// restricted download's, is committed before the first byte: read here
// after the headers of a body too big to be buffered whole.
func TestPlanJSONExportNeedsSensitiveArtifactAccess(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Exports")
	plan := bigPlanJSON(t)
	r := u.plannedRun(t, "exported", map[string][]byte{run.ArtifactPlanJSON: plan})
	other := u.plannedRun(t, "elsewhere", map[string][]byte{run.ArtifactPlanJSON: plan})
	path := planPath(r, "json-output")

	_, readOnly := u.serviceToken(t, "", "workspace:read", "run:read")
	saID, sensitive := u.serviceToken(t, r.WorkspaceID, "run:read", "artifact:read_sensitive")
	missing := callWith(t, env, sensitive, http.MethodGet, "/api/v2/plans/plan_aaaaaaaaaaaaaaaaaaaaaaaaaa/json-output", nil)
	normalize := func(r *apitest.Response) string {
		return strings.ReplaceAll(string(r.Body), r.Header.Get("X-Request-Id"), "REQ")
	}
	if missing.Status != http.StatusNotFound {
		t.Fatalf("missing plan: %d %s", missing.Status, missing.Body)
	}
	if resp := callWith(t, env, readOnly, http.MethodGet, path, nil); resp.Status != http.StatusForbidden {
		t.Fatalf("run:read only: %d %.300s", resp.Status, resp.Body)
	}
	if resp := callWith(t, env, sensitive, http.MethodGet, planPath(other, "json-output"), nil); resp.Status != http.StatusNotFound ||
		normalize(resp) != normalize(missing) {
		t.Fatalf("another workspace's plan: %d %.300s", resp.Status, resp.Body)
	}
	var n int
	_ = env.DB.Get(&n, `SELECT count(*) FROM audit_events WHERE action = 'artifact.sensitive_downloaded'`)
	if n != 0 {
		t.Fatalf("refused exports wrote %d audit records", n)
	}

	resp := openStream(t, env, sensitive, path)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != "private, no-store" ||
		resp.Header.Get("Content-Type") != "application/json" || resp.ContentLength != int64(len(plan)) {
		t.Fatalf("export: %d %v", resp.StatusCode, resp.Header)
	}
	if n := auditCount(t, env, "artifact.sensitive_downloaded", r.ID, saID); n != 1 {
		t.Fatalf("after the headers, before the body: %d audit records, want 1", n)
	}
	got, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.Equal(got, plan) {
		t.Fatalf("body: %d bytes, %v", len(got), err)
	}
	var evidence struct {
		ActorType string `db:"actor_type"`
		Download  string `db:"download"`
		Workspace string `db:"workspace_id"`
		SHA256    string `db:"sha256"`
		Reason    *string
	}
	if err := env.DB.Get(&evidence, `SELECT actor_type, evidence->>'download' AS download, evidence->>'workspace_id' AS workspace_id,
		evidence->>'sha256' AS sha256, evidence->>'reason' AS reason FROM audit_events WHERE action = 'artifact.sensitive_downloaded'`); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(plan)
	if evidence.ActorType != "service_account" || evidence.Download != "plan_json" || evidence.Workspace != r.WorkspaceID ||
		evidence.SHA256 != hex.EncodeToString(sum[:]) || evidence.Reason != nil {
		t.Fatalf("evidence %+v", evidence)
	}
	// The owner's own token may export too.
	u.call(t, http.MethodGet, path, nil).MustStatus(t, http.StatusOK)
}

// TestPlanExportStreamsOnlyWhatItsRecordDescribes: the stream is checked
// against the artifact record as it goes. A record naming another size or
// digest than the object's, or an object cut short at rest, ends the
// stream with an error before its declared length; a record over the
// export limit or pointing at another artifact's object is the missing plan's
// 404 before any byte.
func TestPlanExportStreamsOnlyWhatItsRecordDescribes(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Integrity")
	plan := bigPlanJSON(t)
	tamper := func(t *testing.T, workspace, sql string) run.Run {
		t.Helper()
		r := u.plannedRun(t, workspace, map[string][]byte{run.ArtifactPlanJSON: plan})
		if sql != "" {
			if _, err := env.DB.Exec(sql, r.ID); err != nil {
				t.Fatal(err)
			}
		}
		return r
	}
	broken := func(t *testing.T, r run.Run) {
		t.Helper()
		brokenOff(t, env, u.token, planPath(r, "json-output"))
	}
	t.Run("digest", func(t *testing.T) {
		broken(t, tamper(t, "digest", `UPDATE run_artifacts SET sha256 = sha256('other') WHERE run_id = $1 AND kind = 'plan_json'`))
	})
	t.Run("size beyond the object", func(t *testing.T) {
		broken(t, tamper(t, "longer", `UPDATE run_artifacts SET size_bytes = size_bytes + 1 WHERE run_id = $1 AND kind = 'plan_json'`))
	})
	t.Run("size short of the object", func(t *testing.T) {
		broken(t, tamper(t, "shorter", `UPDATE run_artifacts SET size_bytes = size_bytes - 1 WHERE run_id = $1 AND kind = 'plan_json'`))
	})
	t.Run("object cut at rest", func(t *testing.T) {
		r := tamper(t, "cut", "")
		var key string
		if err := env.DB.Get(&key, `SELECT blob_key FROM run_artifacts WHERE run_id = $1 AND kind = 'plan_json'`, r.ID); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(env.Config.DataDir, "blobs", filepath.FromSlash(key))
		info, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(file, info.Size()-100); err != nil {
			t.Fatal(err)
		}
		broken(t, r)
	})

	missing := u.call(t, http.MethodGet, "/api/v2/plans/plan_aaaaaaaaaaaaaaaaaaaaaaaaaa/json-output", nil)
	for name, sql := range map[string]string{
		"over-limit": `UPDATE run_artifacts SET size_bytes = 100000001 WHERE run_id = $1 AND kind = 'plan_json'`,
		"foreign-object": `UPDATE run_artifacts a SET blob_key = d.blob_key FROM run_artifacts d
			WHERE a.run_id = $1 AND a.kind = 'plan_json' AND d.run_id = a.run_id AND d.kind = 'plan_diff'`,
	} {
		r := tamper(t, name, sql)
		resp := u.call(t, http.MethodGet, planPath(r, "json-output"), nil)
		if resp.Status != http.StatusNotFound || strings.ReplaceAll(string(resp.Body), resp.Header.Get("X-Request-Id"), "") !=
			strings.ReplaceAll(string(missing.Body), missing.Header.Get("X-Request-Id"), "") {
			t.Errorf("%s: %d %.300s", name, resp.Status, resp.Body)
		}
	}
}

// TestRedactedPlanJSONNeedsRunRead: json-output-redacted serves a saved
// plan's redacted plan to run:read, unaudited, verified like the export;
// a plan without one is not found.
func TestRedactedPlanJSONNeedsRunRead(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Redacted")
	redacted := []byte(`{"plan_format_version":"1.2","resource_changes":[],"provider_schemas":{}}`)
	var plan bytes.Buffer
	if err := plandifftest.PlanJSON(&plan, 1); err != nil {
		t.Fatal(err)
	}
	saved := u.plannedRun(t, "saved", map[string][]byte{run.ArtifactPlanJSON: plan.Bytes(), run.ArtifactPlanJSONRedacted: redacted})
	unsaved := u.plannedRun(t, "unsaved", map[string][]byte{run.ArtifactPlanJSON: plan.Bytes()})
	_, reader := u.serviceToken(t, "", "workspace:read", "run:read")
	_, noRuns := u.serviceToken(t, "", "workspace:read")

	got := callWith(t, env, reader, http.MethodGet, planPath(saved, "json-output-redacted"), nil).MustStatus(t, http.StatusOK)
	if !bytes.Equal(got.Body, redacted) || got.Header.Get("Cache-Control") != "private, no-store" {
		t.Fatalf("redacted plan %q %v", got.Body, got.Header)
	}
	if r := callWith(t, env, reader, http.MethodGet, planPath(unsaved, "json-output-redacted"), nil); r.Status != http.StatusNotFound {
		t.Fatalf("a plan without a redacted plan: %d", r.Status)
	}
	if r := callWith(t, env, noRuns, http.MethodGet, planPath(saved, "json-output-redacted"), nil); r.Status != http.StatusForbidden {
		t.Fatalf("without run:read: %d", r.Status)
	}
	var n int
	_ = env.DB.Get(&n, `SELECT count(*) FROM audit_events WHERE action = 'artifact.sensitive_downloaded'`)
	if n != 0 {
		t.Fatalf("a redacted plan wrote %d audit records", n)
	}
	if _, err := env.DB.Exec(`UPDATE run_artifacts SET sha256 = sha256('other') WHERE run_id = $1 AND kind = 'plan_json_redacted'`, saved.ID); err != nil {
		t.Fatal(err)
	}
	brokenOff(t, env, reader, planPath(saved, "json-output-redacted"))
}
