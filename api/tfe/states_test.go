package tfe_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
)

// publishState writes body as the workspace's next state version through
// /api/v2 as the CLI does (declared, then uploaded to its signed URL),
// holding the lock meanwhile, and returns the version's ID.
func (u *cloudUser) publishState(t *testing.T, workspaceID string, serial int, body []byte) string {
	t.Helper()
	u.call(t, http.MethodPost, "/api/v2/workspaces/"+workspaceID+"/actions/lock", nil).MustStatus(t, http.StatusOK)
	defer func() {
		u.call(t, http.MethodPost, "/api/v2/workspaces/"+workspaceID+"/actions/unlock", nil).MustStatus(t, http.StatusOK)
	}()
	v := decode(t, u.call(t, http.MethodPost, "/api/v2/workspaces/"+workspaceID+"/state-versions", map[string]any{"data": map[string]any{
		"type": "state-versions", "attributes": map[string]any{"serial": serial, "md5": md5hex(body), "lineage": "lin-1"}}}).
		MustStatus(t, http.StatusCreated)).Data
	if resp := putUpload(t, v.Attributes["hosted-state-upload-url"].(string), body); resp.StatusCode != http.StatusOK {
		t.Fatalf("state upload = %d", resp.StatusCode)
	}
	return v.ID
}

// bigState is a valid state whose one output is padded past what a
// connection buffers.
func bigState(serial int) []byte {
	return []byte(fmt.Sprintf(`{"version":4,"terraform_version":"1.10.6","serial":%d,"lineage":"lin-1","outputs":{"pad":{"value":"%s","type":"string"}},"resources":[],"check_results":null}`,
		serial, strings.Repeat("p", 24<<20)))
}

// TestStateBodiesAreAuditedBeforeTheFirstByte: every raw state body
// /api/v2 releases leaves an audit event naming the principal and the
// version, committed before the first byte: read here after the headers
// of a body too big to be buffered whole. Sensitive outputs are in
// there, as in every state.
func TestStateBodiesAreAuditedBeforeTheFirstByte(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "StateAudit")
	ws := u.uploadedWorkspace(t, "audited")
	body := bigState(1)
	versionID := u.publishState(t, ws, 1, body)
	download := decode(t, u.call(t, http.MethodGet, "/api/v2/state-versions/"+versionID, nil).MustStatus(t, http.StatusOK)).
		Data.Attributes["hosted-state-download-url"].(string)
	saID, token := u.serviceToken(t, ws, "workspace:read", "state:read")

	resp := openStream(t, env, token, strings.TrimPrefix(download, env.URL))
	if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(body)) || resp.Header.Get("Cache-Control") != "private, no-store" {
		t.Fatalf("download: %d %v", resp.StatusCode, resp.Header)
	}
	if n := auditCount(t, env, "state_version.downloaded", versionID, saID); n != 1 {
		t.Fatalf("after the headers, before the body: %d audit events, want 1", n)
	}
	got, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("body: %d bytes, %v", len(got), err)
	}
	var actor, workspace string
	if err := env.DB.QueryRow(`SELECT actor_type, evidence->>'workspace_id' FROM audit_events
		WHERE action = 'state_version.downloaded' AND target_type = 'state_version' AND target_id = $1`, versionID).Scan(&actor, &workspace); err != nil {
		t.Fatal(err)
	}
	if actor != "service_account" || workspace != ws {
		t.Fatalf("audit actor %q, workspace %q", actor, workspace)
	}
	// A user token's download is the user's.
	u.call(t, http.MethodGet, strings.TrimPrefix(download, env.URL), nil).MustStatus(t, http.StatusOK)
	if n := auditCount(t, env, "state_version.downloaded", versionID, u.ID); n != 1 {
		t.Fatalf("the user's download: %d audit events, want 1", n)
	}
	// A state whose record names another digest ends its stream short.
	if _, err := env.DB.Exec(`UPDATE state_versions SET sha256 = sha256('other') WHERE id = $1`, versionID); err != nil {
		t.Fatal(err)
	}
	brokenOff(t, env, token, strings.TrimPrefix(download, env.URL))
}
