package tfe_test

import (
	"bufio"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/e2e/devstack"
)

// cloudUser is a member with a user API token for /api/v2.
type cloudUser struct {
	*apitest.User
	env   *apitest.Env
	token string
	org   string // slug
}

func newCloudUser(t *testing.T, env *apitest.Env, name string) *cloudUser {
	t.Helper()
	u := env.WithOrganization(name)
	var tok struct{ Token string }
	u.Mutate(http.MethodPost, "/v1/user-tokens", map[string]string{"description": "cli"}).MustStatus(t, http.StatusCreated).Data(t, &tok)
	var org struct{ Slug string }
	u.Get("/api/auth/get-session").MustStatus(t, http.StatusOK)
	var orgs []struct {
		ID   string `json:"id"`
		Slug string `json:"slug"`
	}
	u.Get("/api/auth/organization/list").MustStatus(t, http.StatusOK).Data(t, &orgs)
	org.Slug = orgs[0].Slug
	return &cloudUser{User: u, env: env, token: tok.Token, org: org.Slug}
}

func (u *cloudUser) call(t *testing.T, method, path string, body any) *apitest.Response {
	t.Helper()
	return callWith(t, u.env, u.token, method, path, body)
}

// uploadedWorkspace creates a workspace called name with an uploaded
// one-resource configuration version, and returns its ID.
func (u *cloudUser) uploadedWorkspace(t *testing.T, name string) string {
	t.Helper()
	ws := decode(t, u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/workspaces", map[string]any{"data": map[string]any{
		"type": "workspaces", "attributes": map[string]any{"name": name, "terraform-version": "1.10.6"}}}).MustStatus(t, http.StatusCreated)).Data
	cv := decode(t, u.call(t, http.MethodPost, "/api/v2/workspaces/"+ws.ID+"/configuration-versions", map[string]any{"data": map[string]any{
		"type": "configuration-versions"}}).MustStatus(t, http.StatusCreated)).Data
	if resp := putUpload(t, cv.Attributes["upload-url"].(string), devstack.TarGz(map[string]string{"main.tf": `resource "terraform_data" "x" {}`})); resp.StatusCode != http.StatusOK {
		t.Fatalf("upload = %d", resp.StatusCode)
	}
	return ws.ID
}

// newRun creates a run of the workspace's current configuration and
// returns its ID.
func (u *cloudUser) newRun(t *testing.T, workspaceID string) string {
	t.Helper()
	return decode(t, u.call(t, http.MethodPost, "/api/v2/runs", map[string]any{"data": map[string]any{"type": "runs",
		"relationships": map[string]any{"workspace": map[string]any{"data": map[string]string{"type": "workspaces", "id": workspaceID}}}}}).
		MustStatus(t, http.StatusCreated)).Data.ID
}

func callWith(t *testing.T, env *apitest.Env, token, method, path string, body any) *apitest.Response {
	t.Helper()
	h := map[string]string{"Content-Type": "application/vnd.api+json"}
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	return env.Anonymous().Do(apitest.Request{Method: method, Path: path, Body: body, Header: h})
}

type document struct {
	Data struct {
		ID            string         `json:"id"`
		Type          string         `json:"type"`
		Attributes    map[string]any `json:"attributes"`
		Relationships map[string]struct {
			Data any `json:"data"`
		} `json:"relationships"`
	} `json:"data"`
	Errors []struct {
		Status string            `json:"status"`
		Title  string            `json:"title"`
		Detail string            `json:"detail"`
		Code   string            `json:"code"`
		Meta   map[string]string `json:"meta"`
	} `json:"errors"`
}

func decode(t *testing.T, r *apitest.Response) document {
	t.Helper()
	var d document
	r.JSON(t, &d)
	return d
}

func TestDiscoveryAndPing(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	var disco map[string]any
	env.Anonymous().Get("/.well-known/terraform.json").MustStatus(t, http.StatusOK).JSON(t, &disco)
	if disco["tfe.v2"] != "/api/v2/" || disco["tfe.v2.1"] == "" || disco["tfe.v2.2"] == "" || disco["login.v1"] == nil {
		t.Fatalf("discovery %v", disco)
	}
	ping := env.Anonymous().Get("/api/v2/ping")
	if ping.Status != http.StatusNoContent || ping.Header.Get("TFP-API-Version") != "2.5" || ping.Header.Get("X-TFE-Version") == "" {
		t.Fatalf("ping %d %v", ping.Status, ping.Header)
	}
}

func TestCredentialsAreCheckedFirstAndErrorsCarryRequestIDs(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	for _, token := range []string{"", "garbage", "cut_notatoken", "sst_notatoken", "rat_notatoken"} {
		r := callWith(t, env, token, http.MethodGet, "/api/v2/organizations/acme/entitlement-set", nil)
		d := decode(t, r)
		if r.Status != http.StatusUnauthorized || len(d.Errors) != 1 || d.Errors[0].Code != "invalid_token" || d.Errors[0].Status != "401" {
			t.Fatalf("token %q: %d %s", token, r.Status, r.Body)
		}
		if id := r.Header.Get("X-Request-Id"); id == "" || d.Errors[0].Meta["request_id"] != id {
			t.Fatalf("request id header %q, body %s", id, r.Body)
		}
	}
	// A well-formed client request ID is kept; a malformed one replaced.
	h := map[string]string{"X-Request-Id": "req_abcdefghijklmnopqrstuvwxyz"}
	if r := env.Anonymous().Do(apitest.Request{Method: http.MethodGet, Path: "/api/v2/workspaces/x", Header: h}); r.Header.Get("X-Request-Id") != "req_abcdefghijklmnopqrstuvwxyz" {
		t.Fatal("valid client request ID replaced")
	}
	h["X-Request-Id"] = "my-own-id"
	if r := env.Anonymous().Do(apitest.Request{Method: http.MethodGet, Path: "/api/v2/workspaces/x", Header: h}); r.Header.Get("X-Request-Id") == "my-own-id" {
		t.Fatal("invalid client request ID echoed")
	}
}

func TestClosedGateAnswersNonDisclosing503(t *testing.T) {
	t.Parallel()
	env := apitest.New(t, apitest.WithoutLaunchControl())
	u := newCloudUser(t, env, "Closed")
	for _, path := range []string{
		"/api/v2/organizations/" + u.org + "/entitlement-set",
		"/api/v2/organizations/" + u.org + "/workspaces/anything",
		"/api/v2/workspaces/ws_aaaaaaaaaaaaaaaaaaaaaaaaaa",
	} {
		r := u.call(t, http.MethodGet, path, nil)
		d := decode(t, r)
		if r.Status != http.StatusServiceUnavailable || d.Errors[0].Code != "service_unavailable" ||
			r.Header.Get("Retry-After") != "60" || r.Header.Get("Cache-Control") != "private, no-store" {
			t.Fatalf("%s: %d %v %s", path, r.Status, r.Header, r.Body)
		}
	}
	// Nothing was created by the refused requests.
	r := u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/workspaces", map[string]any{"data": map[string]any{"type": "workspaces", "attributes": map[string]any{"name": "x"}}})
	if r.Status != http.StatusServiceUnavailable {
		t.Fatalf("create under closed gate = %d", r.Status)
	}
	var n int
	_ = env.DB.Get(&n, `SELECT count(*) FROM workspaces`)
	if n != 0 {
		t.Fatal("a refused request persisted a workspace")
	}
}

func md5hex(b []byte) string {
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

const stateTemplate = `{"version":4,"terraform_version":"1.10.6","serial":%d,"lineage":"lin-1","outputs":{"greeting":{"value":"hello","type":"string"},"secret":{"value":"s3cr3t-canary","type":"string","sensitive":true},"obj":{"value":{"a":1},"type":["object",{"a":"number"}]}},"resources":[],"check_results":null}`

// putUpload PUTs bytes to a signed URL without any credential.
func putUpload(t *testing.T, rawURL string, body []byte) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, rawURL, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func TestStateLifecycleThroughTheProtocol(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Stateful")
	base := "/api/v2/organizations/" + u.org

	if r := u.call(t, http.MethodGet, base+"/workspaces/demo", nil); r.Status != http.StatusNotFound {
		t.Fatalf("missing workspace = %d %s", r.Status, r.Body)
	}
	created := u.call(t, http.MethodPost, base+"/workspaces", map[string]any{"data": map[string]any{"type": "workspaces", "attributes": map[string]any{"name": "demo"}}}).
		MustStatus(t, http.StatusCreated)
	ws := decode(t, created).Data
	if ws.Type != "workspaces" || ws.Attributes["name"] != "demo" || ws.Attributes["execution-mode"] != "remote" {
		t.Fatalf("created %s", created.Body)
	}
	// SPEC §2 Workspace: all three destroy flags are advertised false.
	if perms := ws.Attributes["permissions"].(map[string]any); perms["can-queue-destroy"] != false || ws.Attributes["allow-destroy-plan"] != false ||
		ws.Attributes["can-queue-destroy-plan"] != false {
		t.Fatalf("destroy must never be offered: %s", created.Body)
	}
	read := u.call(t, http.MethodGet, base+"/workspaces/demo", nil).MustStatus(t, http.StatusOK)
	if string(read.Body) != string(created.Body) {
		t.Fatalf("read differs from create:\n%s\n%s", created.Body, read.Body)
	}
	u.call(t, http.MethodPatch, "/api/v2/workspaces/"+ws.ID, map[string]any{"data": map[string]any{"type": "workspaces", "attributes": map[string]any{"terraform-version": "1.10.6"}}}).
		MustStatus(t, http.StatusOK)
	if r := u.call(t, http.MethodGet, "/api/v2/workspaces/"+ws.ID+"/current-state-version", nil); r.Status != http.StatusNotFound {
		t.Fatalf("current state of a new workspace = %d", r.Status)
	}

	// Writing state needs the lock.
	state1 := []byte(fmt.Sprintf(stateTemplate, 1))
	svDoc := func(serial int, sum, lineage string) map[string]any {
		return map[string]any{"data": map[string]any{"type": "state-versions", "attributes": map[string]any{"serial": serial, "md5": sum, "lineage": lineage}}}
	}
	if r := u.call(t, http.MethodPost, "/api/v2/workspaces/"+ws.ID+"/state-versions", svDoc(1, md5hex(state1), "lin-1")); r.Status != http.StatusConflict {
		t.Fatalf("state without lock = %d %s", r.Status, r.Body)
	}
	lock := u.call(t, http.MethodPost, "/api/v2/workspaces/"+ws.ID+"/actions/lock", map[string]any{"data": map[string]any{"type": "", "attributes": map[string]any{"reason": "Locked by OpenTofu"}}}).
		MustStatus(t, http.StatusOK)
	if d := decode(t, lock).Data; d.Attributes["locked"] != true || d.Relationships["locked-by"].Data == nil {
		t.Fatalf("lock %s", lock.Body)
	}
	if r := u.call(t, http.MethodPost, "/api/v2/workspaces/"+ws.ID+"/actions/lock", nil); r.Status != http.StatusConflict {
		t.Fatalf("second lock = %d", r.Status)
	}

	sv := decode(t, u.call(t, http.MethodPost, "/api/v2/workspaces/"+ws.ID+"/state-versions", svDoc(1, md5hex(state1), "lin-1")).
		MustStatus(t, http.StatusCreated)).Data
	uploadURL, _ := sv.Attributes["hosted-state-upload-url"].(string)
	jsonURL, _ := sv.Attributes["hosted-json-state-upload-url"].(string)
	if sv.Attributes["status"] != "pending" || !strings.HasPrefix(uploadURL, env.URL) || !strings.HasPrefix(jsonURL, env.URL) {
		t.Fatalf("pending version %v", sv.Attributes)
	}
	// Tampered signature and wrong bytes are refused and leave nothing.
	if resp := putUpload(t, strings.Replace(uploadURL, "signature=", "signature=x", 1), state1); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("tampered upload URL = %d", resp.StatusCode)
	}
	if resp := putUpload(t, uploadURL, append([]byte(" "), state1...)); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("md5 mismatch = %d", resp.StatusCode)
	}
	if resp := putUpload(t, jsonURL, []byte(`{"format_version":"1.0"}`)); resp.StatusCode != http.StatusOK {
		t.Fatalf("json upload = %d", resp.StatusCode)
	}
	if resp := putUpload(t, uploadURL, state1); resp.StatusCode != http.StatusOK {
		t.Fatalf("upload = %d", resp.StatusCode)
	}
	read = u.call(t, http.MethodGet, "/api/v2/state-versions/"+sv.ID, nil).MustStatus(t, http.StatusOK)
	final := decode(t, read).Data
	download, _ := final.Attributes["hosted-state-download-url"].(string)
	if final.Attributes["status"] != "finalized" || download == "" {
		t.Fatalf("finalized version %s", read.Body)
	}
	got := u.call(t, http.MethodGet, strings.TrimPrefix(download, env.URL), nil).MustStatus(t, http.StatusOK)
	if string(got.Body) != string(state1) {
		t.Fatalf("downloaded %q", got.Body)
	}
	cur := decode(t, u.call(t, http.MethodGet, "/api/v2/workspaces/"+ws.ID+"/current-state-version", nil).MustStatus(t, http.StatusOK)).Data
	if cur.ID != sv.ID {
		t.Fatalf("current %s, want %s", cur.ID, sv.ID)
	}

	// Outputs: parsed from the state; the sensitive value never returned.
	outs := u.call(t, http.MethodGet, "/api/v2/workspaces/"+ws.ID+"/current-state-version-outputs", nil).MustStatus(t, http.StatusOK)
	if strings.Contains(string(outs.Body), "s3cr3t-canary") {
		t.Fatal("sensitive output value returned")
	}
	var list struct {
		Data []struct {
			ID         string         `json:"id"`
			Attributes map[string]any `json:"attributes"`
		} `json:"data"`
	}
	outs.JSON(t, &list)
	if len(list.Data) != 3 {
		t.Fatalf("outputs %s", outs.Body)
	}
	for _, o := range list.Data {
		switch o.Attributes["name"] {
		case "greeting":
			if o.Attributes["value"] != "hello" || o.Attributes["detailed-type"] != "string" {
				t.Fatalf("greeting %v", o.Attributes)
			}
		case "secret":
			one := u.call(t, http.MethodGet, "/api/v2/state-version-outputs/"+o.ID, nil).MustStatus(t, http.StatusOK)
			if o.Attributes["sensitive"] != true || o.Attributes["value"] != nil || strings.Contains(string(one.Body), "s3cr3t") {
				t.Fatalf("secret %v / %s", o.Attributes, one.Body)
			}
		}
	}

	// The next version must have a greater serial and the same lineage.
	for _, bad := range []map[string]any{svDoc(1, md5hex([]byte("other")), "lin-1"), svDoc(0, md5hex(state1), "lin-1"), svDoc(2, md5hex(state1), "other-lineage")} {
		if r := u.call(t, http.MethodPost, "/api/v2/workspaces/"+ws.ID+"/state-versions", bad); r.Status != http.StatusConflict {
			t.Fatalf("bad successor %v = %d %s", bad, r.Status, r.Body)
		}
	}
	forced := svDoc(2, md5hex(state1), "other-lineage")
	forced["data"].(map[string]any)["attributes"].(map[string]any)["force"] = true
	u.call(t, http.MethodPost, "/api/v2/workspaces/"+ws.ID+"/state-versions", forced).MustStatus(t, http.StatusCreated)
	// Inline base64 state (older clients) finalizes at once.
	state3 := []byte(fmt.Sprintf(stateTemplate, 3))
	inline := svDoc(3, md5hex(state3), "lin-1")
	inline["data"].(map[string]any)["attributes"].(map[string]any)["state"] = base64.StdEncoding.EncodeToString(state3)
	inline["data"].(map[string]any)["attributes"].(map[string]any)["force"] = true
	v3 := decode(t, u.call(t, http.MethodPost, "/api/v2/workspaces/"+ws.ID+"/state-versions", inline).MustStatus(t, http.StatusCreated)).Data
	if v3.Attributes["status"] != "finalized" {
		t.Fatalf("inline version %v", v3.Attributes)
	}
	var numbers []int
	_ = env.DB.Select(&numbers, `SELECT number FROM state_versions WHERE workspace_id = $1 AND status = 'finalized' ORDER BY number`, ws.ID)
	if len(numbers) != 2 || numbers[0] != 1 || numbers[1] != 2 {
		t.Fatalf("numbers %v", numbers)
	}

	// Another member cannot unlock; an admin force-unlocks.
	writer := env.SignUp("Writer")
	env.Join(u.User, writer, "writer")
	var wt struct{ Token string }
	writer.Mutate(http.MethodPost, "/v1/user-tokens", map[string]string{}).MustStatus(t, http.StatusCreated).Data(t, &wt)
	r := callWith(t, env, wt.Token, http.MethodPost, "/api/v2/workspaces/"+ws.ID+"/actions/unlock", nil)
	if d := decode(t, r); r.Status != http.StatusConflict || !strings.Contains(d.Errors[0].Detail, "is locked by User") {
		t.Fatalf("unlock by another = %d %s", r.Status, r.Body)
	}
	if r := callWith(t, env, wt.Token, http.MethodPost, "/api/v2/workspaces/"+ws.ID+"/actions/force-unlock", nil); r.Status != http.StatusForbidden {
		t.Fatalf("writer force-unlock = %d", r.Status)
	}
	u.call(t, http.MethodPost, "/api/v2/workspaces/"+ws.ID+"/actions/force-unlock", nil).MustStatus(t, http.StatusOK)
	if r := u.call(t, http.MethodPost, "/api/v2/workspaces/"+ws.ID+"/actions/unlock", nil); r.Status != http.StatusConflict {
		t.Fatalf("unlock of an unlocked workspace = %d", r.Status)
	}
	if strings.Contains(env.Logs.String(), "s3cr3t-canary") {
		t.Fatal("logs carry the sensitive output")
	}
	// Each finalized version is one state_version_stored event of opaque
	// IDs and a size: never the workspace's or organization's name.
	stored := 0
	for line := range strings.Lines(env.Logs.String()) {
		if !strings.Contains(line, `"event":"state_version_stored"`) {
			continue
		}
		stored++
		if !strings.Contains(line, `"workspace_id":"`+ws.ID+`"`) || !strings.Contains(line, `"size":`) ||
			strings.Contains(line, `"demo"`) || strings.Contains(line, u.org) {
			t.Fatalf("state_version_stored event: %s", line)
		}
	}
	if stored != len(numbers) {
		t.Fatalf("%d state_version_stored events for %d finalized versions", stored, len(numbers))
	}
}

func TestOtherTenantsSeeTheSameNotFoundAsMissing(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	a := newCloudUser(t, env, "Alpha")
	b := newCloudUser(t, env, "Beta")
	ws := decode(t, a.call(t, http.MethodPost, "/api/v2/organizations/"+a.org+"/workspaces",
		map[string]any{"data": map[string]any{"type": "workspaces", "attributes": map[string]any{"name": "private"}}}).MustStatus(t, http.StatusCreated)).Data
	normalize := func(r *apitest.Response) string {
		return strings.ReplaceAll(string(r.Body), r.Header.Get("X-Request-Id"), "REQ")
	}
	missing := b.call(t, http.MethodGet, "/api/v2/workspaces/ws_aaaaaaaaaaaaaaaaaaaaaaaaaa", nil)
	if missing.Status != http.StatusNotFound {
		t.Fatalf("missing = %d", missing.Status)
	}
	for _, path := range []string{
		"/api/v2/workspaces/" + ws.ID,
		"/api/v2/organizations/" + a.org + "/workspaces/private",
		"/api/v2/organizations/" + a.org + "/entitlement-set",
		"/api/v2/workspaces/" + ws.ID + "/current-state-version",
	} {
		r := b.call(t, http.MethodGet, path, nil)
		if r.Status != http.StatusNotFound || normalize(r) != normalize(missing) {
			t.Fatalf("%s as another tenant: %d %s", path, r.Status, r.Body)
		}
	}
	for _, path := range []string{"/api/v2/workspaces/" + ws.ID + "/actions/lock", "/api/v2/workspaces/" + ws.ID + "/actions/force-unlock"} {
		if r := b.call(t, http.MethodPost, path, nil); r.Status != http.StatusNotFound || normalize(r) != normalize(missing) {
			t.Fatalf("%s as another tenant: %d %s", path, r.Status, r.Body)
		}
	}
	if d := decode(t, a.call(t, http.MethodGet, "/api/v2/workspaces/"+ws.ID, nil)).Data; d.Attributes["locked"] != false {
		t.Fatal("another tenant's action took effect")
	}
}

func TestDeclaredOversizeUploadIsRefusedUnread(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Big")
	ws := decode(t, u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/workspaces",
		map[string]any{"data": map[string]any{"type": "workspaces", "attributes": map[string]any{"name": "big"}}})).Data
	u.call(t, http.MethodPost, "/api/v2/workspaces/"+ws.ID+"/actions/lock", nil).MustStatus(t, http.StatusOK)
	sv := decode(t, u.call(t, http.MethodPost, "/api/v2/workspaces/"+ws.ID+"/state-versions",
		map[string]any{"data": map[string]any{"type": "state-versions", "attributes": map[string]any{"serial": 1, "md5": strings.Repeat("0", 32)}}})).Data
	uploadURL := sv.Attributes["hosted-state-upload-url"].(string)
	conn, err := net.Dial("tcp", strings.TrimPrefix(env.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: x\r\nContent-Length: 100000001\r\n\r\nx", strings.TrimPrefix(uploadURL, env.URL))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("declared oversize upload = %d", resp.StatusCode)
	}
	var pending string
	_ = env.DB.Get(&pending, `SELECT status FROM state_versions WHERE id = $1`, sv.ID)
	if pending != "pending" {
		t.Fatalf("version status %q after a refused upload", pending)
	}
}

func TestServiceAccountTokensStayInsideTheirBoundary(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Bounded")
	create := func(name string) document {
		return decode(t, u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/workspaces",
			map[string]any{"data": map[string]any{"type": "workspaces", "attributes": map[string]any{"name": name}}}).MustStatus(t, http.StatusCreated))
	}
	a, b := create("alpha").Data, create("beta").Data
	var sa struct{ ID string }
	u.Mutate(http.MethodPost, "/v1/service-accounts", map[string]string{"name": "deployer"}).MustStatus(t, http.StatusCreated).Data(t, &sa)
	var issued struct{ Token string }
	u.Mutate(http.MethodPost, "/v1/service-accounts/"+sa.ID+"/tokens", map[string]any{
		"permissions": []string{"workspace:read", "state:read", "state:write"}, "workspace_id": a.ID,
		"expires_at": time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339),
	}).MustStatus(t, http.StatusCreated).Data(t, &issued)
	sst := func(method, path string) *apitest.Response { return callWith(t, env, issued.Token, method, path, nil) }
	sst(http.MethodGet, "/api/v2/workspaces/"+a.ID).MustStatus(t, http.StatusOK)
	sst(http.MethodPost, "/api/v2/workspaces/"+a.ID+"/actions/lock").MustStatus(t, http.StatusOK)
	for _, r := range []*apitest.Response{
		sst(http.MethodGet, "/api/v2/workspaces/"+b.ID),
		sst(http.MethodGet, "/api/v2/organizations/"+u.org+"/workspaces/beta"),
		sst(http.MethodPost, "/api/v2/workspaces/"+b.ID+"/actions/lock"),
	} {
		if r.Status != http.StatusNotFound {
			t.Fatalf("outside its boundary: %d %s", r.Status, r.Body)
		}
	}
	// Its permissions are its own: no force-unlock, no workspace creation.
	if r := sst(http.MethodPost, "/api/v2/workspaces/"+a.ID+"/actions/force-unlock"); r.Status != http.StatusForbidden {
		t.Fatalf("force-unlock without the permission = %d", r.Status)
	}
	var locked struct {
		LockedBy *struct{ Kind, ID string } `json:"locked_by"`
	}
	u.Get("/v1/workspaces/"+a.ID).MustStatus(t, http.StatusOK).Data(t, &locked)
	if locked.LockedBy == nil || locked.LockedBy.Kind != "service_account" || locked.LockedBy.ID != sa.ID {
		t.Fatalf("lock holder on /v1: %+v", locked.LockedBy)
	}
}

func TestUnreadBodyDoesNotPoisonKeepAliveConnection(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "KeepAlive")
	ws := decode(t, u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/workspaces",
		map[string]any{"data": map[string]any{"type": "workspaces", "attributes": map[string]any{"name": "ka"}}})).Data
	u.call(t, http.MethodPost, "/api/v2/workspaces/"+ws.ID+"/actions/lock", nil).MustStatus(t, http.StatusOK)
	body := []byte(fmt.Sprintf(stateTemplate, 1))
	sv := decode(t, u.call(t, http.MethodPost, "/api/v2/workspaces/"+ws.ID+"/state-versions",
		map[string]any{"data": map[string]any{"type": "state-versions", "attributes": map[string]any{"serial": 1, "md5": md5hex(body)}}})).Data
	uploadPath := strings.TrimPrefix(sv.Attributes["hosted-state-upload-url"].(string), env.URL)
	if resp := putUpload(t, env.URL+uploadPath, body); resp.StatusCode != http.StatusOK {
		t.Fatalf("upload %d", resp.StatusCode)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(env.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A retried upload to the finalized version is answered without reading
	// its body; the next request on the same connection must still parse.
	fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", uploadPath, len(body), body)
	fmt.Fprintf(conn, "GET /api/v2/ping HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(conn)
	first, err := http.ReadResponse(br, nil)
	if err != nil || first.StatusCode != http.StatusOK {
		t.Fatalf("replayed upload: %v %v", first, err)
	}
	io.Copy(io.Discard, first.Body)
	second, err := http.ReadResponse(br, nil)
	if err != nil || second.StatusCode != http.StatusNoContent {
		t.Fatalf("request after an unread body: %v %v", second, err)
	}
}
