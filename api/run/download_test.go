package run_test

import (
	"bufio"
	"bytes"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/authserver"
	"github.com/cairnhq/cairn/api/state"
	"github.com/cairnhq/cairn/api/team"
)

func downloadAs(u *apitest.User, path string, body string, header map[string]string) *apitest.Response {
	h := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	for k, v := range header {
		h[k] = v
	}
	return u.Do(apitest.Request{Method: http.MethodPost, Path: path, Body: []byte(body), Header: h})
}

func reasonForm(reason string) string { return url.Values{"reason": {reason}}.Encode() }

// downloadEvents counts the audit records of restricted downloads of a
// target.
func (h *harness) downloadEvents(targetID string) int {
	h.t.Helper()
	return len(h.auditEvidence("artifact.sensitive_downloaded", targetID))
}

// TestRestrictedDownloadRefusals: every refusal of SPEC §4 rule 3 happens
// before a byte is released or an audit record written: a query string, a
// missing, empty or oversized reason, a form over 4 KiB, a JSON body, a
// missing permission, a stale step-up, another organization's run.
func TestRestrictedDownloadRefusals(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.workspace("refusals")
	r := h.plan(h.read(h.createRun(ws).ID), planJSON(t))
	path := "/v1/runs/" + r.ID + "/downloads/plan"

	writer := h.env.SignUp("writer")
	h.env.Join(h.owner, writer, "writer")
	stranger := h.env.WithOrganization("stranger")

	for _, c := range []struct {
		name   string
		u      *apitest.User
		path   string
		body   string
		header map[string]string
		status int
		code   string
	}{
		{"query string", h.owner, path + "?x=1", reasonForm("audit"), nil, http.StatusBadRequest, "QUERY_STRING_REFUSED"},
		{"empty query string key", h.owner, path + "?a", reasonForm("audit"), nil, http.StatusBadRequest, "QUERY_STRING_REFUSED"},
		{"no reason", h.owner, path, "other=1", nil, http.StatusBadRequest, "VALIDATION_FAILED"},
		{"blank reason", h.owner, path, reasonForm(" \t "), nil, http.StatusBadRequest, "VALIDATION_FAILED"},
		{"two reasons", h.owner, path, "reason=a&reason=b", nil, http.StatusBadRequest, "VALIDATION_FAILED"},
		{"501 characters", h.owner, path, reasonForm(strings.Repeat("x", 501)), nil, http.StatusBadRequest, "VALIDATION_FAILED"},
		{"body over 4 KiB", h.owner, path, reasonForm("a") + "&pad=" + strings.Repeat("p", 4096), nil, http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE"},
		{"JSON body", h.owner, path, `{"reason":"audit"}`, map[string]string{"Content-Type": "application/json"}, http.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE"},
		{"writer lacks artifact:read_sensitive", writer, path, reasonForm("audit"), nil, http.StatusForbidden, "FORBIDDEN"},
		{"other organization", stranger, path, reasonForm("audit"), nil, http.StatusNotFound, "NOT_FOUND"},
		{"no emergency state recorded", h.owner, "/v1/runs/" + r.ID + "/downloads/emergency-state", reasonForm("audit"), nil, http.StatusNotFound, "NOT_FOUND"},
	} {
		resp := downloadAs(c.u, c.path, c.body, c.header)
		if resp.Status != c.status || resp.Code() != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, resp.Status, resp.Body, c.status, c.code)
		}
	}
	if n := h.downloadEvents(r.ID); n != 0 {
		t.Fatalf("refused downloads wrote %d audit records", n)
	}

	// A step-up older than 15 minutes is refused until the password is
	// entered again.
	if _, err := h.env.DB.Exec(`UPDATE sessions SET reauthenticated_at = now() - interval '16 minutes' WHERE user_id = $1`, h.owner.ID); err != nil {
		t.Fatal(err)
	}
	if resp := downloadAs(h.owner, path, reasonForm("audit"), nil); resp.Status != http.StatusForbidden || resp.Code() != "REAUTHENTICATION_REQUIRED" {
		t.Fatalf("stale step-up: %d %s", resp.Status, resp.Body)
	}
	h.owner.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/reauthenticate",
		Body: map[string]string{"password": h.owner.Password}}).MustStatus(t, http.StatusOK)
	downloadAs(h.owner, path, reasonForm("audit"), nil).MustStatus(t, http.StatusOK)
	if n := h.downloadEvents(r.ID); n != 1 {
		t.Fatalf("after step-up: %d audit records, want 1", n)
	}
}

// TestRestrictedDownloadStreamsTheStoredBytes: the saved plan and the JSON
// plan come back byte for byte, never cached, with their digest, and each
// leaves an audit record naming the trimmed reason.
func TestRestrictedDownloadStreamsTheStoredBytes(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.workspace("streams")
	plan := planJSON(t)
	r := h.plan(h.read(h.createRun(ws).ID), plan)

	for kind, want := range map[string][]byte{"plan": []byte("saved plan of " + r.ID), "plan-json": plan} {
		resp := downloadAs(h.owner, "/v1/runs/"+r.ID+"/downloads/"+kind, reasonForm("  incident 42  ")+"&csrf_token=ignored", nil).
			MustStatus(t, http.StatusOK)
		sum := sha256.Sum256(want)
		if string(resp.Body) != string(want) || resp.Header.Get("X-Cairn-Content-SHA256") != hex.EncodeToString(sum[:]) ||
			resp.Header.Get("Cache-Control") != "private, no-store" || !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") {
			t.Fatalf("%s: %d bytes, headers %v", kind, len(resp.Body), resp.Header)
		}
	}
	var reasons []string
	if err := h.env.DB.Select(&reasons, `SELECT evidence->>'reason' FROM audit_events
		WHERE action = 'artifact.sensitive_downloaded' AND target_id = $1 AND actor_id = $2`, r.ID, h.owner.ID); err != nil {
		t.Fatal(err)
	}
	if len(reasons) != 2 || reasons[0] != "incident 42" || reasons[1] != "incident 42" {
		t.Fatalf("audit reasons %q", reasons)
	}
}

// TestRestrictedDownloadAuditsBeforeTheFirstByte reads the response up to
// its first body byte, checks the audit record is already committed, then
// drops the connection: the record stays.
func TestRestrictedDownloadAuditsBeforeTheFirstByte(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.workspace("first-byte")
	r := h.plan(h.read(h.createRun(ws).ID), planJSON(t))

	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(h.env.URL, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	form := reasonForm("first byte")
	fmt.Fprintf(conn, "POST /v1/runs/%s/downloads/plan-json HTTP/1.1\r\nHost: api\r\nCookie: %s=%s\r\n"+
		"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n%s",
		r.ID, authserver.SessionCookie, h.owner.Token, len(form), form)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	first := make([]byte, 1)
	if _, err := resp.Body.Read(first); err != nil {
		t.Fatal(err)
	}
	if n := h.downloadEvents(r.ID); n != 1 {
		t.Fatalf("at the first byte: %d audit records, want 1", n)
	}
	conn.Close()
	time.Sleep(100 * time.Millisecond)
	if n := h.downloadEvents(r.ID); n != 1 {
		t.Fatalf("after the client left: %d audit records, want 1", n)
	}
}

// ownerPublishesState writes raw (serial 1) as the workspace's state version as
// its owner, holding the lock, and returns the version's ID.
func (h *harness) ownerPublishesState(workspaceID string, raw []byte) string {
	h.t.Helper()
	sum := md5.Sum(raw)
	owner := h.ownerPrincipal()
	states, workspaces := h.env.Server.Services().State, h.env.Server.Services().Workspaces
	var versionID string
	if err := h.inTx(func(tx *sqlx.Tx) error {
		if _, err := workspaces.LockWorkspace(h.ctx, tx, owner, workspaceID, "publishing"); err != nil {
			return err
		}
		v, err := states.Create(h.ctx, tx, owner, workspaceID, state.CreateInput{Serial: 1, MD5: hex.EncodeToString(sum[:]),
			Lineage: "4a1b2c3d-0000-4000-8000-000000000001"})
		versionID = v.ID
		return err
	}); err != nil {
		h.t.Fatal(err)
	}
	if _, err := states.Upload(h.ctx, versionID, bytes.NewReader(raw)); err != nil {
		h.t.Fatal(err)
	}
	return versionID
}

// TestRawStateDownloadStreamsTheStoredState: a published state version's
// raw bytes come back exactly, audited against the version, for a
// principal with state:read, artifact:read_sensitive and a recent step-up.
func TestRawStateDownloadStreamsTheStoredState(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.workspace("raw-state")
	raw := []byte(`{"version":4,"terraform_version":"1.10.6","serial":1,"lineage":"4a1b2c3d-0000-4000-8000-000000000001",` +
		`"outputs":{"password":{"value":"hunter2","type":"string","sensitive":true}},"resources":[],"check_results":null}`)
	versionID := h.ownerPublishesState(ws, raw)
	path := "/v1/state-versions/" + versionID + "/download"
	writer := h.env.SignUp("writer")
	h.env.Join(h.owner, writer, "writer")
	if resp := downloadAs(writer, path, reasonForm("audit"), nil); resp.Status != http.StatusForbidden {
		t.Fatalf("writer: %d %s", resp.Status, resp.Body)
	}
	resp := downloadAs(h.owner, path, reasonForm("state audit"), nil).MustStatus(t, http.StatusOK)
	if !bytes.Equal(resp.Body, raw) || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("raw state: %q %v", resp.Body, resp.Header)
	}
	if n := h.downloadEvents(versionID); n != 1 {
		t.Fatalf("%d audit records for the state version, want 1", n)
	}
}

// TestRawStateDownloadNeedsSensitiveAccessInItsWorkspace: a member whose
// teams read workspace W (state:read there) and administer workspace X
// (artifact:read_sensitive there), freshly stepped up, is refused W's raw
// state: the sensitive-artifact permission must hold in W itself.
func TestRawStateDownloadNeedsSensitiveAccessInItsWorkspace(t *testing.T) {
	t.Parallel()
	h := setup(t)
	w, x := h.workspace("read-only-here"), h.workspace("admin-there")
	versionID := h.ownerPublishesState(w, []byte(`{"version":4,"terraform_version":"1.10.6","serial":1,`+
		`"lineage":"4a1b2c3d-0000-4000-8000-000000000001","outputs":{},"resources":[],"check_results":null}`))
	member := h.env.SignUp("member")
	h.env.Join(h.owner, member, "member")
	teams := team.NewService(h.env.DB, h.env.Server.Services().Workspaces)
	owner := h.ownerPrincipal()
	if err := h.inTx(func(tx *sqlx.Tx) error {
		for _, g := range []struct{ name, workspaceID, level string }{{"readers", w, access.LevelRead}, {"admins", x, access.LevelAdmin}} {
			tm, err := teams.Create(h.ctx, tx, owner, team.CreateInput{Name: g.name})
			if err != nil {
				return err
			}
			if err := teams.AddMembers(h.ctx, tx, owner, tm.ID, []string{member.ID}); err != nil {
				return err
			}
			if _, err := teams.GrantWorkspace(h.ctx, tx, owner, tm.ID, g.workspaceID, team.WorkspaceAccessInput{Access: g.level}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	member.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/reauthenticate",
		Body: map[string]string{"password": member.Password}}).MustStatus(t, http.StatusOK)
	member.Get("/v1/state-versions/"+versionID).MustStatus(t, http.StatusOK)
	if resp := downloadAs(member, "/v1/state-versions/"+versionID+"/download", reasonForm("audit"), nil); resp.Status != http.StatusForbidden {
		t.Fatalf("raw state of a workspace the member only reads: %d %s", resp.Status, resp.Body)
	}
	if n := h.downloadEvents(versionID); n != 0 {
		t.Fatalf("a refused download wrote %d audit records", n)
	}
}
