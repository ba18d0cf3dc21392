package v1_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/dbtest"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/state"
	"github.com/cairnhq/cairn/api/workspace"
)

// largeTables are the tables that grow with an organization's history: no
// list or read of one page may scan them whole.
var largeTables = []string{"runs", "run_attempts", "run_log_chunks", "state_versions", "audit_events", "workspaces", "configuration_versions"}

// TestListQueriesUseIndexes serves the cursor lists (first and a deep
// page), a run review and the /api/v2 workspace read over a database with
// a few thousand runs, attempts, log chunks, state versions, audit events
// and hundreds of workspaces (with a long queue of waiting runs), records
// every query the server runs for them, and EXPLAINs each one both as
// planned for its values and as the generic plan a cached prepared
// statement falls back to: neither may scan a large table sequentially
// (enable_seqscan stays on). Each is also run both ways (EXPLAIN ANALYZE):
// no node may read and discard more than a few hundred rows of a large
// table.
func TestListQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	_, dbURL := dbtest.NewURL(t)
	rec := &dbtest.Recorder{}
	conn := dbtest.RecordingPool(t, dbURL, rec)
	env := apitest.Start(t, conn, dbURL)
	owner := env.WithOrganization("Grower")
	ctx := context.Background()
	svc := env.Server.Services()
	p := access.Principal{Kind: access.KindUser, ID: owner.ID, OrganizationID: owner.OrganizationID,
		Role: access.RoleOwner, Permissions: access.PermissionsOf(access.RoleOwner)}

	var project struct{ ID string }
	owner.Mutate(http.MethodPost, "/v1/projects", map[string]string{"name": "growth"}).MustStatus(t, http.StatusCreated).Data(t, &project)
	var tok struct{ Token string }
	owner.Mutate(http.MethodPost, "/v1/user-tokens", map[string]string{"description": "cli"}).MustStatus(t, http.StatusCreated).Data(t, &tok)
	var workspaces []string
	if err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) error {
		for i := range 300 {
			w, err := svc.Workspaces.CreateWorkspace(ctx, tx, p, workspace.CreateWorkspaceInput{ProjectID: project.ID,
				Name: fmt.Sprintf("ws-%03d", i), Settings: workspace.ExecutionSettings{ToolVersion: "1.10.6", Region: "us", Platform: "linux_amd64"}})
			if err != nil {
				return err
			}
			workspaces = append(workspaces, w.ID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	hot, last := workspaces[0], workspaces[len(workspaces)-1]

	// One real run is the template the seeded history copies.
	var cvView, created struct{ ID string }
	gzipUpload(owner, "/v1/workspaces/"+last+"/configuration-versions", configArchive).MustStatus(t, http.StatusCreated).Data(t, &cvView)
	owner.Mutate(http.MethodPost, "/v1/runs", map[string]string{"workspace_id": last, "configuration_version_id": cvView.ID,
		"kind": "plan_only"}).MustStatus(t, http.StatusCreated).Data(t, &created)
	template, err := svc.Runs.GetRun(ctx, p, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	cv, err := svc.Runs.CurrentConfiguration(ctx, owner.OrganizationID, last)
	if err != nil || cv == nil {
		t.Fatalf("template configuration: %v", err)
	}
	cvs := map[string]string{}
	var configs []run.ConfigurationVersion
	for _, ws := range workspaces {
		c := *cv
		c.ID, c.WorkspaceID = id.New("cv"), ws
		cvs[ws] = c.ID
		configs = append(configs, c)
	}
	base := time.Now().UTC().Add(-time.Hour)
	var history []run.History
	for i := range 4000 {
		ws := workspaces[i%len(workspaces)]
		if i%4 == 0 {
			ws = hot
		}
		r := template
		at := base.Add(time.Duration(i) * time.Millisecond)
		r.ID, r.WorkspaceID, r.ConfigurationVersionID, r.CreatedAt, r.UpdatedAt = id.New("run"), ws, cvs[ws], at, at
		r.Status = run.StatusPlannedAndFinished
		history = append(history, run.History{Run: r, Log: []string{"Plan: 1 to add.\n"}, Attempts: []run.Attempt{{ID: id.New("att"),
			OrganizationID: r.OrganizationID, RunID: r.ID, Phase: run.PhasePlan, Number: 1, Status: run.AttemptSucceeded, Region: r.Region, QueuedAt: at}}})
	}
	if err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) error {
		if err := run.SeedConfigurations(ctx, tx, configs); err != nil {
			return err
		}
		if err := run.SeedHistory(ctx, tx, history); err != nil {
			return err
		}
		for i := range 5000 {
			if _, err := audit.Append(ctx, tx, audit.Entry{OrganizationID: owner.OrganizationID, Action: "workspace.updated",
				Actor: audit.ActorOf(p), TargetType: "workspace", TargetID: workspaces[i%len(workspaces)]}); err != nil {
				return err
			}
		}
		_, err := svc.Workspaces.LockWorkspace(ctx, tx, p, hot, "state")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	publish := func(serial int) {
		t.Helper()
		body := fmt.Sprintf(`{"version":4,"terraform_version":"1.10.6","serial":%d,"lineage":"l","outputs":{},"resources":[]}`, serial)
		sum := md5.Sum([]byte(body))
		var v state.Version
		if err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) (err error) {
			v, err = svc.State.Create(ctx, tx, p, hot, state.CreateInput{Serial: int64(serial), MD5: hex.EncodeToString(sum[:]), Lineage: "l"})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.State.Upload(ctx, v.ID, strings.NewReader(body)); err != nil {
			t.Fatal(err)
		}
	}
	for serial := 1; serial <= 300; serial++ {
		publish(serial)
	}
	// The organization's other workspaces hold 5,000 runs that wait (a
	// busy queue), so unfinished runs are common in the statistics while
	// the hot workspace, a tenth of all runs, has none: a read of its
	// unfinished runs planned on an index of the organization's queue
	// walks the whole queue to find nothing. Copies of a queued run.
	var waitingIn, waitingCV []string
	for _, ws := range workspaces[1:] {
		waitingIn, waitingCV = append(waitingIn, ws), append(waitingCV, cvs[ws])
	}
	if _, err := conn.Exec(`INSERT INTO runs SELECT (r).* FROM (SELECT jsonb_populate_record(t, jsonb_build_object(
		'id', 'run_waiting_' || n, 'workspace_id', ($2::text[])[1 + n % $4], 'configuration_version_id', ($3::text[])[1 + n % $4],
		'created_at', t.created_at - make_interval(secs => n))) AS r FROM runs t, generate_series(1, 5000) n WHERE t.id = $1) s`,
		created.ID, pq.Array(waitingIn), pq.Array(waitingCV), len(waitingIn)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(`ANALYZE`); err != nil {
		t.Fatal(err)
	}

	// The calls, each list at its first page and at a page found by
	// following its cursor.
	firstAndDeep := func(path string) {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		var pg page
		owner.Get(path+sep+"limit=5").MustStatus(t, http.StatusOK).JSON(t, &pg)
		if pg.Meta.Page.NextCursor == nil {
			t.Fatalf("%s has a single page; the deep page is not reached", path)
		}
		owner.Get(path+sep+"limit=20&cursor="+url.QueryEscape(*pg.Meta.Page.NextCursor)).MustStatus(t, http.StatusOK)
	}
	// A workspace's list, walked to its end, is exactly its runs, newest
	// first (the page is picked from the workspace's index first).
	var want []string
	for i := len(history) - 1; i >= 0; i-- {
		if history[i].Run.WorkspaceID == hot {
			want = append(want, history[i].Run.ID)
		}
	}
	var got []string
	for next := ""; ; {
		path := "/v1/runs?limit=100&workspace_id=" + hot
		if next != "" {
			path += "&cursor=" + url.QueryEscape(next)
		}
		var pg page
		owner.Get(path).MustStatus(t, http.StatusOK).JSON(t, &pg)
		for _, d := range pg.Data {
			got = append(got, d.ID)
		}
		if pg.Meta.Page.NextCursor == nil {
			break
		}
		next = *pg.Meta.Page.NextCursor
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("the hot workspace lists %d runs, want its %d newest first", len(got), len(want))
	}

	rec.Start()
	firstAndDeep("/v1/runs")
	firstAndDeep("/v1/runs?workspace_id=" + hot)
	firstAndDeep("/v1/runs?workspace_id=" + workspaces[7])
	firstAndDeep("/v1/workspaces/" + hot + "/state-versions")
	firstAndDeep("/v1/audit-events")
	firstAndDeep("/v1/workspaces")
	owner.Get("/v1/runs/"+history[0].Run.ID).MustStatus(t, http.StatusOK)
	owner.Get("/v1/runs/"+history[0].Run.ID+"/logs").MustStatus(t, http.StatusOK)
	env.Anonymous().Do(apitest.Request{Method: http.MethodGet, Path: "/api/v2/workspaces/" + hot,
		Header: map[string]string{"Authorization": "Bearer " + tok.Token}}).MustStatus(t, http.StatusOK)
	// A state publication reads the workspace's runs awaiting a decision.
	publish(301)
	queries := distinct(rec.Stop())

	explained := 0
	large := regexp.MustCompile(`\b(` + strings.Join(largeTables, "|") + `)\b`)
	for _, q := range queries {
		if !strings.HasPrefix(strings.ToUpper(strings.TrimSpace(q.Text)), "SELECT") || !large.MatchString(q.Text) {
			continue
		}
		explained++
		for _, mode := range []string{"custom", "generic"} {
			plan := explain(t, conn, q, mode)
			for _, scan := range seqScans(plan) {
				if large.MatchString("[" + scan + "]") {
					t.Errorf("%s plan scans %s sequentially:\n%s\nplan: %s", mode, scan, q.Text, plan)
				}
			}
		}
		// An index walked past most of what it finds is a scan too (a
		// workspace's whole history read to find its unfinished runs):
		// run the statement and count what each node threw away.
		// Both as planned for its values and as the generic plan, which
		// judges a workspace by the average one: the hot workspace is not.
		for _, mode := range []string{"analyze", "generic analyze"} {
			plan := explain(t, conn, q, mode)
			for _, n := range discarded(plan) {
				if large.MatchString("["+n.Relation+"]") && n.removed > maxDiscarded {
					t.Errorf("reading %s discards %d rows (%s):\n%s\nplan: %s", n.Relation, n.removed, mode, q.Text, plan)
				}
			}
		}
	}
	if explained < 10 {
		t.Fatalf("only %d queries on the large tables were recorded: the recorder missed the server's queries", explained)
	}
}

// distinct keeps the first run of each statement text.
func distinct(statements []dbtest.Statement) []dbtest.Statement {
	seen := map[string]bool{}
	var out []dbtest.Statement
	for _, st := range statements {
		if !seen[st.Text] {
			seen[st.Text] = true
			out = append(out, st)
		}
	}
	return out
}

// explain returns the JSON plan of q: "custom" plans it for its recorded
// arguments (a one-off statement); "generic" is the plan a cached prepared
// statement switches to after five runs, which cannot lean on the values;
// "analyze" and "generic analyze" run those two plans with the recorded
// arguments.
func explain(t *testing.T, conn *sqlx.DB, q dbtest.Statement, mode string) string {
	t.Helper()
	ctx := context.Background()
	c, err := conn.Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var plan string
	if mode == "analyze" {
		// Run inside a transaction rolled back after: a FOR UPDATE read
		// takes its locks and keeps nothing.
		tx, err := c.BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if err := tx.GetContext(ctx, &plan, `EXPLAIN (ANALYZE, FORMAT JSON) `+q.Text, q.Args...); err != nil {
			t.Fatalf("running %s: %v", q.Text, err)
		}
		return plan
	}
	if mode == "custom" {
		if err := c.GetContext(ctx, &plan, `EXPLAIN (FORMAT JSON) `+q.Text, q.Args...); err != nil {
			t.Fatalf("explaining %s: %v", q.Text, err)
		}
		return plan
	}
	// "generic" and "generic analyze": the statement prepared under
	// force_generic_plan, in a transaction rolled back after. A prepared
	// statement outlives its transaction, so it is deallocated first: the
	// connection goes back to the pool for the next statement's PREPARE.
	tx, err := c.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_, _ = tx.ExecContext(ctx, `DEALLOCATE ALL`)
		_ = tx.Rollback()
	}()
	if _, err := tx.ExecContext(ctx, `SET LOCAL plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `PREPARE listplan AS `+q.Text); err != nil {
		t.Fatalf("preparing %s: %v", q.Text, err)
	}
	// EXPLAIN EXECUTE takes no parameters of its own: the values go in as
	// literals (the generic plan does not depend on them).
	literals := make([]string, len(q.Args))
	for i, a := range q.Args {
		literals[i] = sqlLiteral(t, a)
	}
	options := "FORMAT JSON"
	if mode == "generic analyze" {
		options = "ANALYZE, FORMAT JSON"
	}
	execute := `EXPLAIN (` + options + `) EXECUTE listplan`
	if len(literals) > 0 {
		execute += "(" + strings.Join(literals, ", ") + ")"
	}
	if err := tx.GetContext(ctx, &plan, execute); err != nil {
		t.Fatalf("%s of %s: %v", mode, q.Text, err)
	}
	return plan
}

// sqlLiteral writes a recorded argument as an SQL literal.
func sqlLiteral(t *testing.T, v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case string:
		return pq.QuoteLiteral(v)
	case []byte:
		return `'\x` + hex.EncodeToString(v) + `'::bytea`
	case int64, float64:
		return fmt.Sprint(v)
	case bool:
		return fmt.Sprint(v)
	case time.Time:
		return pq.QuoteLiteral(v.Format(time.RFC3339Nano))
	}
	t.Fatalf("no literal for an argument of type %T", v)
	return ""
}

// seqScans lists the relations a JSON plan scans sequentially.
func seqScans(plan string) []string {
	var doc []struct{ Plan planNode }
	if err := json.Unmarshal([]byte(plan), &doc); err != nil || len(doc) == 0 {
		return []string{"unreadable plan"}
	}
	var out []string
	var walk func(n planNode)
	walk = func(n planNode) {
		if n.NodeType == "Seq Scan" {
			out = append(out, n.Relation)
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(doc[0].Plan)
	return out
}

// maxDiscarded bounds the rows one node of a page's query may read and
// throw away; the seeded tables hold thousands.
const maxDiscarded = 200

type planNode struct {
	NodeType       string     `json:"Node Type"`
	Relation       string     `json:"Relation Name"`
	Plans          []planNode `json:"Plans"`
	Loops          float64    `json:"Actual Loops"`
	ByFilter       float64    `json:"Rows Removed by Filter"`
	ByIndexRecheck float64    `json:"Rows Removed by Index Recheck"`
	removed        int
}

// discarded lists the nodes of an analyzed JSON plan with the rows each
// read and discarded over all its loops.
func discarded(plan string) []planNode {
	var doc []struct{ Plan planNode }
	if err := json.Unmarshal([]byte(plan), &doc); err != nil || len(doc) == 0 {
		return []planNode{{Relation: "unreadable plan", removed: 1 << 30}}
	}
	var out []planNode
	var walk func(n planNode)
	walk = func(n planNode) {
		n.removed = int((n.ByFilter + n.ByIndexRecheck) * max(n.Loops, 1))
		out = append(out, n)
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(doc[0].Plan)
	return out
}
