package v1_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
)

// envelopeShape is what every /v1 success body is checked against: a
// single object carries data.id and data.object, a list data[] and
// meta.page with next_cursor, both meta.request_id.
type envelopeShape struct {
	Data any `json:"data"`
	Meta struct {
		RequestID string `json:"request_id"`
		Page      *struct {
			NextCursor *string `json:"next_cursor"`
		} `json:"page"`
	} `json:"meta"`
}

func requireSingle(t *testing.T, what string, resp *apitest.Response, object string) map[string]any {
	t.Helper()
	var env envelopeShape
	resp.MustStatus(t, http.StatusOK).JSON(t, &env)
	data, ok := env.Data.(map[string]any)
	if !ok || env.Meta.RequestID == "" || data["id"] == nil || data["id"] == "" || data["object"] != object {
		t.Fatalf("%s: not a single-object envelope with object %q: %s", what, object, resp.Body)
	}
	return data
}

func requireList(t *testing.T, what string, resp *apitest.Response, object string) []any {
	t.Helper()
	var env envelopeShape
	resp.MustStatus(t, http.StatusOK).JSON(t, &env)
	rows, ok := env.Data.([]any)
	if !ok || env.Meta.RequestID == "" || env.Meta.Page == nil || env.Meta.Page.NextCursor != nil {
		t.Fatalf("%s: not a complete list envelope (data[], meta.page.next_cursor null): %s", what, resp.Body)
	}
	for _, r := range rows {
		if row, _ := r.(map[string]any); row == nil || row["id"] == nil || row["id"] == "" || (object != "" && row["object"] != object) {
			t.Fatalf("%s: row without id or object %q: %s", what, object, resp.Body)
		}
	}
	return rows
}

// TestRunLogsTailAndEnvelopes reads a run's log through /v1 (SPEC §4 logs):
// tail returns the newest n chunks in ascending order with
// X-Cairn-Log-Last-Sequence naming the newest, after/limit page forward,
// tail with either is refused, and tail is bounded 1..100. The same run's
// policy evidence, its log chunks and the lists that are never paged
// (variables, policy sets and versions, attachments, tool versions) have
// the documented envelopes (SPEC §2 Response envelopes).
func TestRunLogsTailAndEnvelopes(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Logger")
	var project, ws, cv, created struct{ ID string }
	u.Mutate(http.MethodPost, "/v1/projects", map[string]string{"name": "logs"}).MustStatus(t, http.StatusCreated).Data(t, &project)
	u.Mutate(http.MethodPost, "/v1/workspaces", map[string]any{"project_id": project.ID, "name": "logs",
		"execution_settings": map[string]string{"tool_version": "1.10.6", "region": "us", "platform": "linux_amd64"}}).
		MustStatus(t, http.StatusCreated).Data(t, &ws)
	gzipUpload(u, "/v1/workspaces/"+ws.ID+"/configuration-versions", configArchive).MustStatus(t, http.StatusCreated).Data(t, &cv)
	u.Mutate(http.MethodPost, "/v1/runs", map[string]string{"workspace_id": ws.ID, "configuration_version_id": cv.ID,
		"kind": "plan_only"}).MustStatus(t, http.StatusCreated).Data(t, &created)

	// The worker's own sink writes the log: one chunk per flush.
	ctx := context.Background()
	sink, err := env.Server.Services().Runs.NewLogSink(ctx, created.ID, "plan", nil)
	if err != nil {
		t.Fatal(err)
	}
	const chunks = 7
	for i := 1; i <= chunks; i++ {
		fmt.Fprintf(sink, "line %d\n", i)
		if err := sink.Flush(ctx, i == chunks); err != nil {
			t.Fatal(err)
		}
	}

	logs := func(query string) ([]int64, string) {
		t.Helper()
		resp := u.Get("/v1/runs/" + created.ID + "/logs?" + query)
		rows := requireList(t, "logs?"+query, resp, "log_chunk")
		var seqs []int64
		for _, r := range rows {
			row := r.(map[string]any)
			seq := int64(row["sequence"].(float64))
			if row["id"] != created.ID+":"+strconv.FormatInt(seq, 10) || row["body"] != fmt.Sprintf("line %d\n", seq) {
				t.Fatalf("chunk %v", row)
			}
			seqs = append(seqs, seq)
		}
		return seqs, resp.Header.Get("X-Cairn-Log-Last-Sequence")
	}
	if seqs, last := logs("tail=3"); fmt.Sprint(seqs) != "[5 6 7]" || last != "7" {
		t.Fatalf("tail=3 = %v, last sequence %q; want [5 6 7], 7", seqs, last)
	}
	if seqs, last := logs("tail=100"); len(seqs) != chunks || seqs[0] != 1 || last != "7" {
		t.Fatalf("tail=100 = %v, last sequence %q", seqs, last)
	}
	if seqs, last := logs("after=2&limit=2"); fmt.Sprint(seqs) != "[3 4]" || last != "4" {
		t.Fatalf("after=2&limit=2 = %v, last sequence %q", seqs, last)
	}
	for _, q := range []string{"tail=2&after=1", "tail=2&limit=5", "tail=101", "tail=-1"} {
		if resp := u.Get("/v1/runs/" + created.ID + "/logs?" + q); resp.Status != http.StatusBadRequest {
			t.Errorf("logs?%s = %d %s, want 400", q, resp.Status, resp.Body)
		}
	}

	policy := requireSingle(t, "run policy", u.Get("/v1/runs/"+created.ID+"/policy"), "run_policy")
	if policy["id"] != created.ID || policy["run_id"] != created.ID {
		t.Fatalf("run policy id %v run_id %v, want %s", policy["id"], policy["run_id"], created.ID)
	}
	u.Mutate(http.MethodPost, "/v1/workspaces/"+ws.ID+"/variables", map[string]any{"key": "region", "value": "eu", "sensitive": false}).
		MustStatus(t, http.StatusCreated)
	var set struct{ ID string }
	u.Mutate(http.MethodPost, "/v1/policy-sets", map[string]string{"name": "guard"}).MustStatus(t, http.StatusCreated).Data(t, &set)
	for path, object := range map[string]string{
		"/v1/workspaces/" + ws.ID + "/variables":          "workspace_variable",
		"/v1/policy-sets":                                 "policy_set",
		"/v1/policy-sets/" + set.ID + "/versions":         "",
		"/v1/workspaces/" + ws.ID + "/policy-attachments": "",
	} {
		if rows := requireList(t, path, u.Get(path), object); object != "" && len(rows) != 1 {
			t.Fatalf("%s listed %d rows, want 1", path, len(rows))
		}
	}
	requireList(t, "tool versions", u.Get("/v1/tool-versions"), "")
}
