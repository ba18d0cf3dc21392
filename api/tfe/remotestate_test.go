package tfe_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/run"
)

func consumersDoc(ids ...string) map[string]any {
	data := make([]map[string]string, len(ids))
	for i, id := range ids {
		data[i] = map[string]string{"type": "workspaces", "id": id}
	}
	return map[string]any{"data": data}
}

func consumersPath(workspaceID string) string {
	return "/api/v2/workspaces/" + workspaceID + "/relationships/remote-state-consumers"
}

// listedConsumers reads every consumer ID of a workspace through /api/v2.
func (u *cloudUser) listedConsumers(t *testing.T, workspaceID string) []string {
	t.Helper()
	var list listDocument
	u.call(t, http.MethodGet, consumersPath(workspaceID)+"?page[size]=100", nil).MustStatus(t, http.StatusOK).JSON(t, &list)
	ids := []string{}
	for _, d := range list.Data {
		ids = append(ids, d.ID)
	}
	slices.Sort(ids)
	return ids
}

func sortedIDs(ids ...string) []string { return slices.Sorted(slices.Values(ids)) }

// TestRemoteStateConsumersThroughTheRemoteBackendAPI walks HCP's
// remote-state-consumers relationship: a new workspace shares with nobody,
// POST adds (twice is once), DELETE removes (absent IDs ignored), PATCH
// replaces, the list pages and holds workspace documents equal to the
// workspace's own, global-remote-state lists every other workspace and
// refuses additions, a workspace cannot consume itself, and missing or
// invisible workspaces are not found. Each change is audited.
func TestRemoteStateConsumersThroughTheRemoteBackendAPI(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Sharing")
	a, b, c, d := newWorkspace(t, u, "a"), newWorkspace(t, u, "b"), newWorkspace(t, u, "c"), newWorkspace(t, u, "d")

	read := decode(t, u.call(t, http.MethodGet, "/api/v2/workspaces/"+a, nil).MustStatus(t, http.StatusOK))
	if v, ok := read.Data.Attributes["global-remote-state"]; !ok || v != false {
		t.Errorf("a new workspace's global-remote-state = %v (present %v), want false", v, ok)
	}
	if got := u.listedConsumers(t, a); len(got) != 0 {
		t.Fatalf("a new workspace lists consumers %v", got)
	}

	u.call(t, http.MethodPost, consumersPath(a), consumersDoc(b, c)).MustStatus(t, http.StatusNoContent)
	u.call(t, http.MethodPost, consumersPath(a), consumersDoc(b)).MustStatus(t, http.StatusNoContent)
	if got, want := u.listedConsumers(t, a), sortedIDs(b, c); !slices.Equal(got, want) {
		t.Errorf("after adding b and c: %v, want %v", got, want)
	}
	// An item is the consumer's own workspace document.
	var list listDocument
	u.call(t, http.MethodGet, consumersPath(a)+"?page[size]=1&page[number]=2", nil).MustStatus(t, http.StatusOK).JSON(t, &list)
	if len(list.Data) != 1 || list.Meta.Pagination.TotalCount != 2 || list.Meta.Pagination.CurrentPage != 2 {
		t.Fatalf("page 2 of size 1: %+v", list)
	}
	own := decode(t, u.call(t, http.MethodGet, "/api/v2/workspaces/"+list.Data[0].ID, nil).MustStatus(t, http.StatusOK))
	if fmt.Sprint(own.Data.Attributes) != fmt.Sprint(list.Data[0].Attributes) {
		t.Errorf("a listed consumer's attributes differ from its own:\n%v\n%v", list.Data[0].Attributes, own.Data.Attributes)
	}

	u.call(t, http.MethodDelete, consumersPath(a), consumersDoc(b, d)).MustStatus(t, http.StatusNoContent)
	if got := u.listedConsumers(t, a); !slices.Equal(got, []string{c}) {
		t.Errorf("after removing b (and d, never listed): %v, want [%s]", got, c)
	}
	u.call(t, http.MethodPatch, consumersPath(a), consumersDoc(d, b)).MustStatus(t, http.StatusNoContent)
	if got, want := u.listedConsumers(t, a), sortedIDs(b, d); !slices.Equal(got, want) {
		t.Errorf("after replacing with b and d: %v, want %v", got, want)
	}
	if n := auditCount(t, env, "workspace.remote_state_sharing_changed", a, u.ID); n != 3 {
		t.Errorf("%d sharing changes audited, want 3 (add, remove, replace; the repeated add changed nothing)", n)
	}

	// Refusals: itself, bad documents, missing and invisible workspaces.
	for _, bad := range []struct {
		method string
		body   any
		status int
	}{
		{http.MethodPost, consumersDoc(a), http.StatusUnprocessableEntity},
		{http.MethodPatch, consumersDoc(b, a), http.StatusUnprocessableEntity},
		{http.MethodPost, map[string]any{"data": []any{}}, http.StatusUnprocessableEntity},
		{http.MethodPost, map[string]any{"data": []map[string]string{{"type": "teams", "id": b}}}, http.StatusUnprocessableEntity},
		{http.MethodPost, consumersDoc("ws-missing"), http.StatusNotFound},
	} {
		if got := u.call(t, bad.method, consumersPath(a), bad.body); got.Status != bad.status {
			t.Errorf("%s %v = %d, want %d: %s", bad.method, bad.body, got.Status, bad.status, got.Body)
		}
	}
	other := newCloudUser(t, env, "Elsewhere")
	foreign := newWorkspace(t, other, "foreign")
	u.call(t, http.MethodPost, consumersPath(a), consumersDoc(foreign)).MustStatus(t, http.StatusNotFound)
	other.call(t, http.MethodGet, consumersPath(a), nil).MustStatus(t, http.StatusNotFound)
	if got, want := u.listedConsumers(t, a), sortedIDs(b, d); !slices.Equal(got, want) {
		t.Errorf("after the refusals: %v, want %v", got, want)
	}

	// Global: every other workspace is listed, and nothing can be added.
	u.call(t, http.MethodPatch, "/api/v2/workspaces/"+a, map[string]any{"data": map[string]any{"type": "workspaces",
		"attributes": map[string]any{"global-remote-state": true}}}).MustStatus(t, http.StatusOK)
	if got, want := u.listedConsumers(t, a), sortedIDs(b, c, d); !slices.Equal(got, want) {
		t.Errorf("global: %v, want %v", got, want)
	}
	refused := u.call(t, http.MethodPost, consumersPath(a), consumersDoc(c))
	if refused.Status != http.StatusUnprocessableEntity || !strings.Contains(string(refused.Body), "global-remote-state") {
		t.Errorf("adding while global = %d %s, want 422 naming global-remote-state", refused.Status, refused.Body)
	}
	// A writer may not change it; the admin's change back restores the list.
	_, writerToken := joinWithToken(t, env, u, "Writer", "writer")
	if got := callWith(t, env, writerToken, http.MethodPatch, "/api/v2/workspaces/"+a, map[string]any{"data": map[string]any{
		"type": "workspaces", "attributes": map[string]any{"global-remote-state": false}}}); got.Status != http.StatusForbidden {
		t.Errorf("a writer turning sharing off = %d, want 403", got.Status)
	}
	callWith(t, env, writerToken, http.MethodPost, consumersPath(a), consumersDoc(c)).MustStatus(t, http.StatusForbidden)
	u.call(t, http.MethodPatch, "/api/v2/workspaces/"+a, map[string]any{"data": map[string]any{"type": "workspaces",
		"attributes": map[string]any{"global-remote-state": false}}}).MustStatus(t, http.StatusOK)
	if got, want := u.listedConsumers(t, a), sortedIDs(b, d); !slices.Equal(got, want) {
		t.Errorf("global off again: %v, want %v", got, want)
	}
	created := decode(t, u.call(t, http.MethodPost, "/api/v2/organizations/"+u.org+"/workspaces", map[string]any{"data": map[string]any{
		"type": "workspaces", "attributes": map[string]any{"name": "born-shared", "global-remote-state": true}}}).MustStatus(t, http.StatusCreated))
	if created.Data.Attributes["global-remote-state"] != true {
		t.Errorf("created with global-remote-state: %v", created.Data.Attributes["global-remote-state"])
	}

	// A consumer deleted is off the list.
	u.call(t, http.MethodDelete, "/api/v2/workspaces/"+d, nil).MustStatus(t, http.StatusNoContent)
	if got := u.listedConsumers(t, a); !slices.Equal(got, []string{b}) {
		t.Errorf("after deleting d: %v, want [%s]", got, b)
	}
}

// sharedReads are the reads a terraform_remote_state data source makes of
// a producer, given its current state version.
func sharedReads(org, name, producer, version string) []string {
	return []string{
		"/api/v2/organizations/" + org + "/workspaces/" + name,
		"/api/v2/workspaces/" + producer,
		"/api/v2/workspaces/" + producer + "/current-state-version",
		"/api/v2/workspaces/" + producer + "/current-state-version-outputs",
		"/api/v2/state-versions/" + version,
		"/api/v2/state-versions/" + version + "/download",
		"/api/v2/state-versions/" + version + "/outputs",
	}
}

// TestRunTokenReadsOnlySharedState: B's run token reads A's workspace,
// current state, its body and its outputs only once A shares its state
// with B (by listing B, or globally); before that, and for C's run
// always, each read answers exactly as a workspace that does not exist,
// byte for byte but the request ID. A shared read is audited as the run,
// naming both workspaces; it stays read-only (no lock, no state write, no
// run, no older version).
func TestRunTokenReadsOnlySharedState(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Consumers")
	a := u.uploadedWorkspace(t, "producer")
	older := u.publishState(t, a, 1, []byte(fmt.Sprintf(stateTemplate, 1)))
	current := u.publishState(t, a, 2, []byte(fmt.Sprintf(stateTemplate, 2)))
	b, c := u.uploadedWorkspace(t, "consumer"), u.uploadedWorkspace(t, "bystander")
	bRun, cRun := u.newRun(t, b), u.newRun(t, c)
	bToken, cToken := runToken(t, env, bRun, run.PhasePlan), runToken(t, env, cRun, run.PhasePlan)
	missingWS := "ws-" + strings.Repeat("z", len(a)-3)
	missingSV := "sv-" + strings.Repeat("z", len(current)-3)
	missing := sharedReads(u.org, "no-such-workspace", missingWS, missingSV)

	notFoundAsMissing := func(when, token string) {
		t.Helper()
		for i, path := range sharedReads(u.org, "producer", a, current) {
			got := callWith(t, env, token, http.MethodGet, path, nil)
			want := callWith(t, env, token, http.MethodGet, missing[i], nil)
			if got.Status != http.StatusNotFound || want.Status != http.StatusNotFound ||
				withoutRequestID(got.Body) != withoutRequestID(want.Body) || got.Header.Get("Content-Type") != want.Header.Get("Content-Type") {
				t.Errorf("%s: %s = %d %s; a missing one = %d %s", when, path, got.Status, got.Body, want.Status, want.Body)
			}
		}
	}
	notFoundAsMissing("not shared", bToken)
	if n := auditCount(t, env, "state.read_by_consumer", a, bRun); n != 0 {
		t.Errorf("refused reads audited as consumer reads: %d", n)
	}

	u.call(t, http.MethodPost, consumersPath(a), consumersDoc(b)).MustStatus(t, http.StatusNoContent)
	reads := sharedReads(u.org, "producer", a, current)
	for _, path := range reads {
		if got := callWith(t, env, bToken, http.MethodGet, path, nil); got.Status != http.StatusOK {
			t.Errorf("shared: %s = %d %s", path, got.Status, got.Body)
		}
	}
	body := callWith(t, env, bToken, http.MethodGet, "/api/v2/state-versions/"+current+"/download", nil).MustStatus(t, http.StatusOK).Body
	if !strings.Contains(string(body), `"serial":2`) {
		t.Errorf("the shared download is not the current state: %.200s", body)
	}
	if n := auditCount(t, env, "state.read_by_consumer", a, bRun); n != len(reads)+1 {
		t.Errorf("%d consumer reads audited, want %d", n, len(reads)+1)
	}
	var evidence string
	if err := env.DB.Get(&evidence, `SELECT evidence::text FROM audit_events WHERE action = 'state.read_by_consumer' AND actor_id = $1 LIMIT 1`, bRun); err != nil ||
		!strings.Contains(evidence, b) || !strings.Contains(evidence, a) {
		t.Errorf("consumer read evidence %s (%v) names not both workspaces", evidence, err)
	}
	// Read-only, current state only, nothing of runs.
	for _, op := range []struct{ method, path string }{
		{http.MethodGet, "/api/v2/state-versions/" + older},
		{http.MethodGet, "/api/v2/state-versions/" + older + "/download"},
		{http.MethodPost, "/api/v2/workspaces/" + a + "/actions/lock"},
		{http.MethodPost, "/api/v2/workspaces/" + a + "/state-versions"},
		{http.MethodGet, "/api/v2/workspaces/" + a + "/runs"},
		{http.MethodGet, consumersPath(a)},
	} {
		if got := callWith(t, env, bToken, op.method, op.path, map[string]any{"data": map[string]any{"type": "state-versions",
			"attributes": map[string]any{"serial": 3, "md5": md5hex([]byte("x")), "lineage": "lin-1"}}}); got.Status != http.StatusNotFound {
			t.Errorf("shared, %s %s = %d, want 404", op.method, op.path, got.Status)
		}
	}
	notFoundAsMissing("shared with b only", cToken)

	// Global: every workspace's runs read it; off again, only the list.
	u.call(t, http.MethodPatch, "/api/v2/workspaces/"+a, map[string]any{"data": map[string]any{"type": "workspaces",
		"attributes": map[string]any{"global-remote-state": true}}}).MustStatus(t, http.StatusOK)
	callWith(t, env, cToken, http.MethodGet, "/api/v2/workspaces/"+a+"/current-state-version-outputs", nil).MustStatus(t, http.StatusOK)
	u.call(t, http.MethodPatch, "/api/v2/workspaces/"+a, map[string]any{"data": map[string]any{"type": "workspaces",
		"attributes": map[string]any{"global-remote-state": false}}}).MustStatus(t, http.StatusOK)
	notFoundAsMissing("global off", cToken)
	u.call(t, http.MethodDelete, consumersPath(a), consumersDoc(b)).MustStatus(t, http.StatusNoContent)
	notFoundAsMissing("b removed", bToken)

	// The run still reads its own workspace.
	callWith(t, env, bToken, http.MethodGet, "/api/v2/workspaces/"+b, nil).MustStatus(t, http.StatusOK)
}
