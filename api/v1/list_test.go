package v1_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/platform/cursor"
	"github.com/cairnhq/cairn/api/platform/secret"
	v1 "github.com/cairnhq/cairn/api/v1"
)

type page struct {
	Data []struct {
		ID     string `json:"id"`
		Object string `json:"object"`
	} `json:"data"`
	Meta struct {
		RequestID string `json:"request_id"`
		Page      struct {
			NextCursor *string `json:"next_cursor"`
		} `json:"page"`
		HasMore *bool `json:"has_more"`
	} `json:"meta"`
}

func TestCursorListWalksNewestFirstAndRejectsForeignCursors(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("Lister")
	var created []string
	for i := range 5 {
		resp := u.Mutate(http.MethodPost, "/v1/projects", map[string]string{"name": fmt.Sprintf("p%d", i)}).
			MustStatus(t, http.StatusCreated)
		var p struct{ ID string }
		resp.Data(t, &p)
		created = append(created, p.ID)
	}

	var seen []string
	next := ""
	for pages := 0; ; pages++ {
		path := "/v1/projects?limit=2"
		if next != "" {
			path += "&cursor=" + url.QueryEscape(next)
		}
		var pg page
		u.Get(path).MustStatus(t, http.StatusOK).JSON(t, &pg)
		if pg.Meta.HasMore != nil {
			t.Fatal("lists must not carry has_more")
		}
		for _, d := range pg.Data {
			if d.Object != "project" {
				t.Fatalf("object %q", d.Object)
			}
			seen = append(seen, d.ID)
		}
		if pg.Meta.Page.NextCursor == nil {
			break
		}
		next = *pg.Meta.Page.NextCursor
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
	}
	// The organization's Default Project, created with it, is the oldest.
	if len(seen) != 6 {
		t.Fatalf("walked %d projects, want 6", len(seen))
	}
	for i := range created {
		if seen[i] != created[len(created)-1-i] {
			t.Fatalf("order %v, want newest first %v", seen, created)
		}
	}

	// A cursor from page one, then bent: tampered, used on another list, or
	// with another filter.
	var first page
	u.Get("/v1/projects?limit=1").JSON(t, &first)
	cur := *first.Meta.Page.NextCursor
	tampered := []byte(cur)
	tampered[5] ^= 0x02
	for _, tc := range []struct{ path, code string }{
		{"/v1/projects?cursor=" + url.QueryEscape(string(tampered)), "PROJECT_LIST_CURSOR_INVALID"},
		{"/v1/projects?cursor=2026-11-22T00:00:00Z", "PROJECT_LIST_CURSOR_INVALID"},
		{"/v1/projects?cursor=" + url.QueryEscape("2026-11-22T00:00:00Z|prj_x"), "PROJECT_LIST_CURSOR_INVALID"},
		{"/v1/workspaces?cursor=" + url.QueryEscape(cur), "WORKSPACE_LIST_CURSOR_INVALID"},
		{"/v1/audit-events?cursor=" + url.QueryEscape(cur), "AUDIT_EVENT_LIST_CURSOR_INVALID"},
	} {
		resp := u.Get(tc.path)
		if resp.Status != http.StatusBadRequest || resp.Code() != tc.code {
			t.Errorf("%s = %d %s, want 400 %s", tc.path, resp.Status, resp.Body, tc.code)
		}
	}
	// A workspace cursor is bound to its project filter.
	var wsPage page
	proj := created[0]
	for i := range 2 {
		u.Mutate(http.MethodPost, "/v1/workspaces", map[string]any{"project_id": proj, "name": fmt.Sprintf("w%d", i),
			"execution_settings": map[string]string{"tool_version": "1.10.6", "region": "us", "platform": "linux_amd64"}}).
			MustStatus(t, http.StatusCreated)
	}
	u.Get("/v1/workspaces?limit=1&project_id="+proj).MustStatus(t, http.StatusOK).JSON(t, &wsPage)
	wsCursor := url.QueryEscape(*wsPage.Meta.Page.NextCursor)
	u.Get("/v1/workspaces?limit=1&project_id="+proj+"&cursor="+wsCursor).MustStatus(t, http.StatusOK)
	if resp := u.Get("/v1/workspaces?limit=1&cursor=" + wsCursor); resp.Code() != "WORKSPACE_LIST_CURSOR_INVALID" {
		t.Fatalf("cursor reused without its filter = %d %s", resp.Status, resp.Body)
	}
	for _, limit := range []string{"0", "101", "-1", "abc"} {
		if resp := u.Get("/v1/projects?limit=" + limit); resp.Status != http.StatusBadRequest || resp.Code() != "VALIDATION_FAILED" {
			t.Errorf("limit=%s = %d %s", limit, resp.Status, resp.Body)
		}
	}
}

// The run list refuses every cursor it did not issue for itself within the
// last day with its own code: malformed, over-sized, outdated (older than
// RunListCursorMaxAge, or undated as run cursors were before they carried
// their age), another list's, another filter's, a bare timestamp or a
// delimiter string. A cursor it issued pages.
func TestRunListCursorInvalid(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := env.WithOrganization("RunLister")
	key := secret.Derive(env.Config.AuthSecret, "list-cursor")
	runs := cursor.NewCodec(key).Dated(v1.RunListCursorMaxAge)
	at := func(d time.Duration) cursor.Codec {
		return runs.WithClock(func() time.Time { return time.Now().Add(d) })
	}
	pos := cursor.Position{CreatedAt: time.Now().Add(-time.Hour), ID: "run_00000000000000000000000000"}
	var pg page
	u.Get("/v1/runs?limit=1&cursor="+url.QueryEscape(at(-23*time.Hour).Encode("runs", "", pos))).MustStatus(t, http.StatusOK).JSON(t, &pg)

	var projects page
	u.Get("/v1/projects?limit=1").MustStatus(t, http.StatusOK).JSON(t, &projects)
	u.Mutate(http.MethodPost, "/v1/projects", map[string]string{"name": "second"}).MustStatus(t, http.StatusCreated)
	u.Get("/v1/projects?limit=1").MustStatus(t, http.StatusOK).JSON(t, &projects)
	projectCursor := *projects.Meta.Page.NextCursor
	for name, q := range map[string]string{
		"outdated":       "cursor=" + url.QueryEscape(at(-25*time.Hour).Encode("runs", "", pos)),
		"undated":        "cursor=" + url.QueryEscape(cursor.NewCodec(key).Encode("runs", "", pos)),
		"another list":   "cursor=" + url.QueryEscape(projectCursor),
		"another filter": "workspace_id=ws_x&cursor=" + url.QueryEscape(at(0).Encode("runs", "", pos)),
		"another key":    "cursor=" + url.QueryEscape(cursor.NewCodec([]byte("another key, 32 bytes or longer!!")).Dated(v1.RunListCursorMaxAge).Encode("runs", "", pos)),
		"malformed":      "cursor=not%20a%20cursor",
		"over-sized":     "cursor=" + strings.Repeat("A", cursor.MaxLength+1),
		"bare timestamp": "cursor=2026-11-22T00:00:00Z",
		"delimiter":      "cursor=" + url.QueryEscape("2026-11-22T00:00:00Z|run_x"),
	} {
		resp := u.Get("/v1/runs?" + q)
		if resp.Status != http.StatusBadRequest || resp.Code() != "RUN_LIST_CURSOR_INVALID" {
			t.Errorf("%s: %d %s, want 400 RUN_LIST_CURSOR_INVALID", name, resp.Status, resp.Body)
		}
	}
	// The projects list keeps its undated cursors.
	u.Get("/v1/projects?limit=1&cursor="+url.QueryEscape(projectCursor)).MustStatus(t, http.StatusOK)
}
