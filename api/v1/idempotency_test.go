package v1_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
)

// envelopeParts splits an enveloped body into its raw data and request ID.
func envelopeParts(t *testing.T, body []byte) (json.RawMessage, string) {
	t.Helper()
	var env struct {
		Data json.RawMessage `json:"data"`
		Meta struct {
			RequestID string `json:"request_id"`
		} `json:"meta"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("not an envelope: %s", body)
	}
	return env.Data, env.Meta.RequestID
}

func countRows(t *testing.T, env *apitest.Env, query string, args ...any) int {
	t.Helper()
	var n int
	if err := env.DB.Get(&n, query, args...); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestConcurrentRequestsWithOneKeyMutateOnce(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Racer")
	const racers = 8
	var wg sync.WaitGroup
	responses := make([]*apitest.Response, racers)
	start := make(chan struct{})
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			responses[i] = u.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/projects",
				Body: map[string]string{"name": "racing"}, Header: map[string]string{"Idempotency-Key": "race-1"}})
		}()
	}
	close(start)
	wg.Wait()

	if n := countRows(t, env, `SELECT count(*) FROM projects WHERE organization_id = $1 AND name <> 'Default Project'`, u.OrganizationID); n != 1 {
		t.Fatalf("%d projects created, want exactly 1", n)
	}
	var first json.RawMessage
	created, inProgress := 0, 0
	for _, r := range responses {
		switch {
		case r.Status == http.StatusCreated:
			created++
			data, _ := envelopeParts(t, r.Body)
			if first == nil {
				first = data
			} else if !bytes.Equal(first, data) {
				t.Fatalf("replayed data differs:\n%s\n%s", first, data)
			}
		case r.Status == http.StatusConflict && r.Code() == "IDEMPOTENCY_IN_PROGRESS":
			inProgress++
		default:
			t.Fatalf("unexpected answer %d %s", r.Status, r.Body)
		}
	}
	if created == 0 {
		t.Fatal("no request succeeded")
	}
	t.Logf("%d created or replayed, %d in progress", created, inProgress)
	if n := countRows(t, env, `SELECT count(*) FROM audit_events WHERE organization_id = $1 AND action = 'project.created'`, u.OrganizationID); n != 1 {
		t.Fatalf("%d project.created audit events, want 1", n)
	}
}

func TestReplayReturnsTheOriginalAnswerWithAFreshRequestID(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Replayer")
	req := apitest.Request{Method: http.MethodPost, Path: "/v1/projects",
		Body: map[string]string{"name": "once"}, Header: map[string]string{"Idempotency-Key": "replay-1"}}
	first := u.Do(req).MustStatus(t, http.StatusCreated)
	// Same input in another key order and spacing is the same request.
	req.Body = []byte(`{ "name" : "once" }`)
	second := u.Do(req).MustStatus(t, http.StatusCreated)

	data1, id1 := envelopeParts(t, first.Body)
	data2, id2 := envelopeParts(t, second.Body)
	if !bytes.Equal(data1, data2) {
		t.Fatalf("replay data differs:\n%s\n%s", data1, data2)
	}
	if id1 == id2 || second.Header.Get("X-Request-Id") != id2 {
		t.Fatalf("replay must carry its own request ID: first %q, replay %q", id1, id2)
	}
	if second.Header.Get("Idempotent-Replayed") != "true" || first.Header.Get("Idempotent-Replayed") != "" {
		t.Fatal("Idempotent-Replayed header wrong")
	}
	// Everything but the request ID is byte-identical.
	if !bytes.Equal(bytes.ReplaceAll(first.Body, []byte(id1), nil), bytes.ReplaceAll(second.Body, []byte(id2), nil)) {
		t.Fatalf("bodies differ beyond request_id:\n%s\n%s", first.Body, second.Body)
	}
}

func TestKeyReusedWithOtherInputConflicts(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Reuser")
	h := map[string]string{"Idempotency-Key": "reuse-1"}
	u.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/projects", Body: map[string]string{"name": "a"}, Header: h}).
		MustStatus(t, http.StatusCreated)
	resp := u.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/projects", Body: map[string]string{"name": "b"}, Header: h})
	if resp.Status != http.StatusConflict || resp.Code() != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("reuse = %d %s", resp.Status, resp.Body)
	}
	// The same key on another route is other input too.
	resp = u.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/service-accounts", Body: map[string]string{"name": "a"}, Header: h})
	if resp.Status != http.StatusConflict || resp.Code() != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("reuse on another route = %d %s", resp.Status, resp.Body)
	}
	// Keys belong to one principal: another member may use the same key.
	other := env.SignUp("Other")
	env.Join(u, other, "writer")
	other.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/projects", Body: map[string]string{"name": "c"}, Header: h}).
		MustStatus(t, http.StatusCreated)
}

func TestMissingOrMalformedKeyIsRejected(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Keyless")
	for _, tc := range []struct {
		key, code string
	}{
		{"", "IDEMPOTENCY_KEY_REQUIRED"},
		{"has space", "IDEMPOTENCY_KEY_INVALID"},
		{strings.Repeat("k", 256), "IDEMPOTENCY_KEY_INVALID"},
		{"caf\u00e9", "IDEMPOTENCY_KEY_INVALID"},
	} {
		h := map[string]string{}
		if tc.key != "" {
			h["Idempotency-Key"] = tc.key
		}
		resp := u.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/projects", Body: map[string]string{"name": "x"}, Header: h})
		if resp.Status != http.StatusBadRequest || resp.Code() != tc.code {
			t.Errorf("key %q: %d %s, want 400 %s", tc.key, resp.Status, resp.Body, tc.code)
		}
	}
	if n := countRows(t, env, `SELECT count(*) FROM projects WHERE name <> 'Default Project'`); n != 0 {
		t.Fatalf("%d projects created without a valid key", n)
	}
	// The longest valid key works.
	u.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/projects", Body: map[string]string{"name": "x"},
		Header: map[string]string{"Idempotency-Key": strings.Repeat("~", 255)}}).MustStatus(t, http.StatusCreated)
}

func TestFailedMutationLeavesNoRecordAndKeyStaysUsable(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Failer")
	h := map[string]string{"Idempotency-Key": "fail-then-succeed"}
	u.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/projects", Body: map[string]string{"name": "dup"}, Header: map[string]string{"Idempotency-Key": "first"}}).
		MustStatus(t, http.StatusCreated)
	// A duplicate name fails and commits nothing, not even the key.
	resp := u.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/projects", Body: map[string]string{"name": "dup"}, Header: h})
	if resp.Status != http.StatusConflict || resp.Code() != "PROJECT_NAME_TAKEN" {
		t.Fatalf("duplicate project = %d %s", resp.Status, resp.Body)
	}
	if n := countRows(t, env, `SELECT count(*) FROM idempotency_records WHERE idempotency_key = 'fail-then-succeed'`); n != 0 {
		t.Fatalf("a failed mutation left %d idempotency records", n)
	}
	// The key is free: a corrected request under it succeeds.
	u.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/projects", Body: map[string]string{"name": "corrected"}, Header: h}).
		MustStatus(t, http.StatusCreated)
}
