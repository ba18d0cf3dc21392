package main

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/assembly"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/id"
	cairnrun "github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/state"
	"github.com/cairnhq/cairn/api/workspace"
)

var (
	scaleFactor = flag.Float64("scale-factor", 1, "size of the scale phase's large organization, as a fraction of 10,000 workspaces, "+
		"200,000 runs, 10,000 state versions and 1,000,000 audit events (0.01 for a smoke run)")
	scaleRounds = flag.Int("scale-rounds", 200, "measured calls of each kind per organization in the scale phase")
)

// growthSize is what the scale phase seeds into one organization.
type growthSize struct {
	workspaces, runs, hotRuns, stateVersions, auditEvents int
}

func (g growthSize) String() string {
	return fmt.Sprintf("%d workspaces, %d runs (%d in one workspace), %d state versions in one workspace, %d audit events",
		g.workspaces, g.runs, g.hotRuns, g.stateVersions, g.auditEvents)
}

// largeSize is the organization of issue 32 scaled by factor; smallSize is
// the baseline every call is compared with.
func largeSize(factor float64) growthSize {
	n := func(full int) int { return max(int(float64(full)*factor), 10) }
	return growthSize{workspaces: n(10_000), runs: n(200_000), hotRuns: n(20_000), stateVersions: n(10_000), auditEvents: n(1_000_000)}
}

// smallSize is the baseline organization. Its hot workspace holds half its
// runs and 50 state versions, so the deep pages of both organizations'
// workspace lists are full pages of 20 rows, like the large one's.
var smallSize = growthSize{workspaces: 10, runs: 100, hotRuns: 50, stateVersions: 50, auditEvents: 500}

var growthSettings = workspace.ExecutionSettings{ToolVersion: "1.10.6", Region: "us", Platform: "linux_amd64"}

// growthOrg is one seeded organization and what its calls need.
type growthOrg struct {
	size            growthSize
	email, session  string
	userToken       string
	principal       access.Principal
	projectID       string
	workspaceIDs    []string
	hot             string // the workspace holding the state versions and the most runs
	templateRunID   string
	reviewRunID     string
	browser         *http.Client
	cursors         map[string]string // list name -> cursor of its deep page
	seeded          time.Duration
	rowsDeep        map[string]int
	configurationID string
	// template and templateCV are what every seeded run copies.
	template   cairnrun.Run
	templateCV cairnrun.ConfigurationVersion
}

// benchGrowth seeds a large and a small organization through the
// services' own code (workspaces, runs with attempts and logs, state
// versions, audit events; batched in transactions) and measures the first
// and a deep page of every cursor list, a run review, a workspace read on
// /api/v2 and two dashboard pages in both, reporting the large
// organization's latency as a ratio of the small one's.
func benchGrowth(ctx context.Context, dbURL string) error {
	api, files, stopAPI, err := startTLSAPI(dbURL)
	if err != nil {
		return err
	}
	defer stopAPI()
	bff, stopBFF, err := startBFF(dbURL, api, files)
	if err != nil {
		return err
	}
	defer stopBFF()
	conn, err := db.OpenPool(dbURL, 8)
	if err != nil {
		return err
	}
	defer conn.Close()
	environ := map[string]string{
		"DATABASE_URL": dbURL, "AUTH_SECRET": "bench-auth-secret-0123456789abcdef0123456789abcdef",
		"CAIRN_MASTER_KEY": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", "IDEMPOTENCY_HMAC_KEY": "HyAhIiMkJSYnKCkqKywtLi8wMTIzNDU2Nzg5Ojs8PT4=",
		"CAIRN_DATA_DIR": api.DataDir, "CAIRN_PUBLIC_URL": api.URL,
	}
	// The API process stores blobs where its environment says (the bench
	// cluster's S3 when set); the seeding writes to the same store.
	for _, kv := range os.Environ() {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "CAIRN_BLOB_") || strings.HasPrefix(k, "AWS_") {
			environ[k] = v
		}
	}
	cfg, err := config.LoadFrom(environ)
	if err != nil {
		return err
	}
	deps, err := assembly.Assemble(cfg, conn, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return err
	}
	tr := api.Client.Transport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost, tr.MaxIdleConns = 16, 16
	client := &http.Client{Transport: tr, Timeout: time.Minute}

	large := &growthOrg{size: largeSize(*scaleFactor * *size)}
	small := &growthOrg{size: smallSize}
	fmt.Printf("scale: seeding a large organization (%s) and a small one (%s)\n", large.size, small.size)
	for i, o := range []*growthOrg{small, large} {
		name := []string{"growth-small", "growth-large"}[i]
		start := time.Now()
		if err := seedGrowthOrg(ctx, client, api, bff, conn, deps, o, name); err != nil {
			return fmt.Errorf("seeding %s: %w", name, err)
		}
		o.seeded = time.Since(start)
		fmt.Printf("  %s seeded in %s\n", name, o.seeded.Round(time.Second))
	}
	// What autovacuum does after a bulk load: fresh statistics and a
	// visibility map, so the planner sees the tables as they are. Every
	// table, not a list of the large ones: a table left out (the settings
	// versions every workspace read joins, the outputs, the run events)
	// was analyzed by autovacuum in the middle of a measurement instead.
	if _, err := conn.Exec(`VACUUM ANALYZE`); err != nil {
		return fmt.Errorf("analyzing the seeded database: %w", err)
	}

	type listSpec struct {
		name string
		path func(o *growthOrg) string
		// rows of the list in an organization, to pick the deep page.
		rows func(o *growthOrg) int
	}
	specs := []listSpec{
		{"runs of the organization", func(*growthOrg) string { return "/v1/runs" }, func(o *growthOrg) int { return o.size.runs }},
		{"runs of a workspace", func(o *growthOrg) string { return "/v1/runs?workspace_id=" + o.hot }, func(o *growthOrg) int { return o.size.hotRuns }},
		{"state versions", func(o *growthOrg) string { return "/v1/workspaces/" + o.hot + "/state-versions" }, func(o *growthOrg) int { return o.size.stateVersions }},
		{"audit events", func(*growthOrg) string { return "/v1/audit-events" }, func(o *growthOrg) int { return o.size.auditEvents }},
		{"workspaces", func(*growthOrg) string { return "/v1/workspaces" }, func(o *growthOrg) int { return o.size.workspaces }},
	}
	for _, o := range []*growthOrg{small, large} {
		o.cursors, o.rowsDeep = map[string]string{}, map[string]int{}
		for _, s := range specs {
			// The deep page starts half way down the list (at most 50,000
			// rows down, so finding it stays quick at full size).
			depth := min(s.rows(o)/2, 50_000)
			c, rows, err := deepCursor(client, api.URL+s.path(o), o.session, depth)
			if err != nil {
				return fmt.Errorf("walking %s: %w", s.name, err)
			}
			o.cursors[s.name], o.rowsDeep[s.name] = c, rows
		}
	}

	type growthCall struct {
		name string
		get  func(o *growthOrg) (int, error)
	}
	v1Get := func(path func(o *growthOrg) string) func(o *growthOrg) (int, error) {
		return func(o *growthOrg) (int, error) {
			return getStatus(client, api.URL+path(o), "Cookie", "__Secure-identity.session_token="+o.session)
		}
	}
	var calls []growthCall
	for _, s := range specs {
		sep := "?"
		if strings.Contains(s.path(large), "?") {
			sep = "&"
		}
		calls = append(calls,
			growthCall{"GET " + s.name + ", first page", v1Get(func(o *growthOrg) string { return s.path(o) + sep + "limit=20" })},
			growthCall{"GET " + s.name + ", deep page", v1Get(func(o *growthOrg) string {
				return s.path(o) + sep + "limit=20&cursor=" + url.QueryEscape(o.cursors[s.name])
			})})
	}
	calls = append(calls,
		growthCall{"GET /v1/runs/{id} (run review)", v1Get(func(o *growthOrg) string { return "/v1/runs/" + o.reviewRunID })},
		growthCall{"GET /api/v2/workspaces/{id}", func(o *growthOrg) (int, error) {
			return getStatus(client, api.URL+"/api/v2/workspaces/"+o.hot, "Authorization", "Bearer "+o.userToken)
		}},
		growthCall{"dashboard /runs", func(o *growthOrg) (int, error) { return getStatus(o.browser, bff+"/runs", "", "") }},
		growthCall{"dashboard /workspaces/{id} (overview)", func(o *growthOrg) (int, error) {
			return getStatus(o.browser, bff+"/workspaces/"+o.hot, "", "")
		}},
	)

	fmt.Printf("\nscale: %d calls of each kind per organization, alternating large and small (large/small ratio, target <= 1.5)\n", *scaleRounds)
	fmt.Printf("%-46s %10s %10s %10s %10s %8s %8s\n", "call", "large p50", "large p99", "small p50", "small p99", "x p50", "x p99")
	var over []string
	report := func(name string, lat [2][]float64) {
		lp50, lp99 := percentile(lat[0], 0.5), percentile(lat[0], 0.99)
		sp50, sp99 := percentile(lat[1], 0.5), percentile(lat[1], 0.99)
		mark := ""
		if lp50/sp50 > 1.5 {
			mark = "  OVER"
			over = append(over, name)
		}
		fmt.Printf("%-46s %7.2f ms %7.2f ms %7.2f ms %7.2f ms %7.2fx %7.2fx%s\n", name, lp50, lp99, sp50, sp99, lp50/sp50, lp99/sp99, mark)
	}
	for _, c := range calls {
		var lat [2][]float64
		for round := 0; round < *scaleRounds+5; round++ {
			// The deadline ends the phase here too; the deferred stops
			// end the processes it started.
			if err := ctx.Err(); err != nil {
				return err
			}
			for i, o := range []*growthOrg{large, small} {
				start := time.Now()
				st, err := c.get(o)
				if err != nil || st != http.StatusOK {
					return fmt.Errorf("%s in %s: %d %v", c.name, []string{"the large", "the small"}[i], st, err)
				}
				if round >= 5 { // the first rounds warm caches and connections
					lat[i] = append(lat[i], ms64(time.Since(start)))
				}
			}
		}
		report(c.name, lat)
	}
	lat, err := measureDeletion(ctx, client, api.URL, conn, deps, large, small)
	if err != nil {
		return err
	}
	report(fmt.Sprintf("DELETE /api/v2/workspaces/{id} (%d runs)", doomedRuns), lat)
	fmt.Printf("deep pages start at row %v of the large organization's lists and %v of the small one's\n", large.rowsDeep, small.rowsDeep)
	if len(over) > 0 {
		fmt.Printf("scale: %d calls over the 1.5 ratio: %s\n\n", len(over), strings.Join(over, "; "))
	} else {
		fmt.Printf("scale: every p50 ratio <= 1.5\n\n")
	}
	return nil
}

// doomedRuns is the history of every workspace the deletion call deletes,
// the same in both organizations: the ratio is then the cost of the large
// tables around it (a foreign key check without an index scans a whole
// table for every row deleted).
const doomedRuns = 20

// measureDeletion deletes a fresh workspace with doomedRuns ended runs in
// each organization per round, alternating, and returns the latencies
// (large, small) of the deletions alone; seeding is not timed.
func measureDeletion(ctx context.Context, client *http.Client, apiURL string, conn *sqlx.DB, deps assembly.Deps,
	large, small *growthOrg) ([2][]float64, error) {
	const warmUp = 2
	rounds := min(*scaleRounds, 20)
	var lat [2][]float64
	for round := range rounds + warmUp {
		for i, o := range []*growthOrg{large, small} {
			workspaceID, err := seedDoomedWorkspace(ctx, conn, deps, o, round)
			if err != nil {
				return lat, err
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodDelete, apiURL+"/api/v2/workspaces/"+workspaceID, nil)
			if err != nil {
				return lat, err
			}
			req.Header.Set("Authorization", "Bearer "+o.userToken)
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				return lat, fmt.Errorf("deleting a workspace: %w", err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				return lat, fmt.Errorf("deleting a workspace: %d", resp.StatusCode)
			}
			if round >= warmUp {
				lat[i] = append(lat[i], ms64(time.Since(start)))
			}
		}
	}
	return lat, nil
}

// seedDoomedWorkspace creates a workspace with its configuration version
// and doomedRuns ended runs (attempts and logs included) in one
// transaction, through the code the rest of the seeding uses.
func seedDoomedWorkspace(ctx context.Context, conn *sqlx.DB, deps assembly.Deps, o *growthOrg, n int) (string, error) {
	var workspaceID string
	err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) error {
		w, err := deps.Services.Workspaces.CreateWorkspace(ctx, tx, o.principal, workspace.CreateWorkspaceInput{
			ProjectID: o.projectID, Name: fmt.Sprintf("doomed-%04d", n), Settings: growthSettings})
		if err != nil {
			return err
		}
		workspaceID = w.ID
		base := time.Now().UTC().Truncate(time.Microsecond).Add(-time.Hour)
		cv := o.templateCV
		cv.ID, cv.WorkspaceID, cv.CreatedAt = id.New("cv"), w.ID, base
		if err := cairnrun.SeedConfigurations(ctx, tx, []cairnrun.ConfigurationVersion{cv}); err != nil {
			return err
		}
		hs := make([]cairnrun.History, doomedRuns)
		for i := range hs {
			hs[i] = seededRun(o.template, w.ID, cv.ID, i, base.Add(time.Duration(i)*time.Second))
		}
		return cairnrun.SeedHistory(ctx, tx, hs)
	})
	if err != nil {
		return "", fmt.Errorf("seeding a workspace to delete: %w", err)
	}
	return workspaceID, nil
}

// getStatus performs a GET, reads the whole body and returns the status.
func getStatus(c *http.Client, u, header, value string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	if header != "" {
		req.Header.Set(header, value)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// deepCursor walks a cursor list in pages of 100 until depth rows are
// behind it and returns the cursor there, and how many rows it passed.
func deepCursor(c *http.Client, list, session string, depth int) (string, int, error) {
	sep := "?"
	if strings.Contains(list, "?") {
		sep = "&"
	}
	cur, passed := "", 0
	for passed < depth {
		u := list + sep + fmt.Sprintf("limit=%d", min(100, depth-passed))
		if cur != "" {
			u += "&cursor=" + url.QueryEscape(cur)
		}
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		req.Header.Set("Cookie", "__Secure-identity.session_token="+session)
		resp, err := c.Do(req)
		if err != nil {
			return "", 0, err
		}
		var page struct {
			Data []json.RawMessage `json:"data"`
			Meta struct {
				Page struct {
					NextCursor *string `json:"next_cursor"`
				} `json:"page"`
			} `json:"meta"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return "", 0, fmt.Errorf("%s: %d %v", u, resp.StatusCode, err)
		}
		passed += len(page.Data)
		if page.Meta.Page.NextCursor == nil {
			break
		}
		cur = *page.Meta.Page.NextCursor
	}
	if cur == "" {
		return "", 0, fmt.Errorf("%s has no page past its first", list)
	}
	return cur, passed, nil
}

// seedGrowthOrg creates the organization's owner and project through the
// API, then its workspaces, runs, state versions and audit events in this
// process with the services the API runs, in batched transactions.
func seedGrowthOrg(ctx context.Context, client *http.Client, api *apiProcess, bff string, conn *sqlx.DB, deps assembly.Deps, o *growthOrg, name string) error {
	o.email = fmt.Sprintf("%s-%d@example.com", name, time.Now().UnixNano())
	var err error
	if o.session, err = signUp(client, api.URL, o.email, false); err != nil {
		return err
	}
	if st := call(client, http.MethodPost, api.URL+"/api/auth/organization/create", o.session,
		map[string]string{"name": name, "slug": fmt.Sprintf("%s-%d", name, time.Now().UnixNano()%1e6)}, nil, nil); st != http.StatusOK {
		return fmt.Errorf("creating the organization: %d", st)
	}
	if st := call(client, http.MethodPost, api.URL+"/v1/projects", o.session, map[string]string{"name": name},
		map[string]any{"Idempotency-Key": "growth-project-" + name}, &o.projectID); st != http.StatusCreated {
		return fmt.Errorf("creating the project: %d", st)
	}
	var tok struct{ Token string }
	if _, err := v1(client, http.MethodPost, api.URL+"/v1/user-tokens", o.session, jsonBody(map[string]string{"description": "growth"}),
		"application/json", &tok); err != nil {
		return err
	}
	o.userToken = tok.Token
	var userID, orgID string
	if err := conn.QueryRow(`SELECT u.id, m.organization_id FROM users u JOIN memberships m ON m.user_id = u.id
		WHERE u.email = $1`, o.email).Scan(&userID, &orgID); err != nil {
		return fmt.Errorf("reading the owner: %w", err)
	}
	o.principal = access.Principal{Kind: access.KindUser, ID: userID, Name: name, OrganizationID: orgID,
		Role: access.RoleOwner, Permissions: access.PermissionsOf(access.RoleOwner)}
	if o.browser, err = dashboardSession(bff, o.email); err != nil {
		return err
	}

	// Workspaces: creation takes the organization's name lock, so one
	// writer, many per transaction.
	for start := 0; start < o.size.workspaces; start += 250 {
		err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) error {
			for i := start; i < min(start+250, o.size.workspaces); i++ {
				w, err := deps.Services.Workspaces.CreateWorkspace(ctx, tx, o.principal, workspace.CreateWorkspaceInput{
					ProjectID: o.projectID, Name: fmt.Sprintf("ws-%05d", i), Settings: growthSettings})
				if err != nil {
					return err
				}
				o.workspaceIDs = append(o.workspaceIDs, w.ID)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("creating workspaces: %w", err)
		}
	}
	o.hot = o.workspaceIDs[0]

	// One real run, through the API, is the template every seeded run
	// copies what it pins from; it plans in a workspace of its own so its
	// queue hold and lock stay out of the measured ones.
	last := o.workspaceIDs[len(o.workspaceIDs)-1]
	if o.configurationID, err = uploadConfiguration(client, api.URL, o.session, last); err != nil {
		return err
	}
	if st := call(client, http.MethodPost, api.URL+"/v1/runs", o.session, map[string]string{"workspace_id": last,
		"configuration_version_id": o.configurationID, "kind": "plan_only", "message": "growth template"},
		map[string]any{"Idempotency-Key": "growth-template-" + name}, &o.templateRunID); st != http.StatusCreated {
		return fmt.Errorf("creating the template run: %d", st)
	}
	if o.template, err = deps.Services.Runs.GetRun(ctx, o.principal, o.templateRunID); err != nil {
		return err
	}
	cv, err := deps.Services.Runs.CurrentConfiguration(ctx, orgID, last)
	if err != nil || cv == nil {
		return fmt.Errorf("reading the template's configuration: %v", err)
	}
	o.templateCV = *cv

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	wg.Add(3)
	go func() { defer wg.Done(); errs <- seedRuns(ctx, conn, o, o.template, o.templateCV) }()
	go func() { defer wg.Done(); errs <- seedStateVersions(ctx, conn, deps, o) }()
	go func() { defer wg.Done(); errs <- seedAudit(ctx, conn, o) }()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// seedRuns writes the organization's ended runs: hotRuns in the hot
// workspace and the rest spread over the others, newest first one second
// apart, each with its plan attempt (and apply attempt when applied) and a
// three-chunk plan log.
func seedRuns(ctx context.Context, conn *sqlx.DB, o *growthOrg, template cairnrun.Run, cv cairnrun.ConfigurationVersion) error {
	const batch = 200
	base := time.Now().UTC().Truncate(time.Microsecond).Add(-time.Duration(o.size.runs+10) * time.Second)
	// Every workspace gets a configuration version of its own, a copy of
	// the template's, before any run names it.
	cvs := make(map[string]string, len(o.workspaceIDs))
	for start := 0; start < len(o.workspaceIDs); start += 500 {
		var batchCVs []cairnrun.ConfigurationVersion
		for _, ws := range o.workspaceIDs[start:min(start+500, len(o.workspaceIDs))] {
			c := cv
			c.ID, c.WorkspaceID, c.CreatedAt = id.New("cv"), ws, base
			cvs[ws] = c.ID
			batchCVs = append(batchCVs, c)
		}
		if err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) error { return cairnrun.SeedConfigurations(ctx, tx, batchCVs) }); err != nil {
			return fmt.Errorf("seeding configuration versions: %w", err)
		}
	}
	others := o.workspaceIDs[1:]
	workspaceOf := func(i int) string {
		// The hot workspace's runs are spread evenly through the history.
		if i*o.size.hotRuns/o.size.runs != (i+1)*o.size.hotRuns/o.size.runs || len(others) == 0 {
			return o.hot
		}
		return others[i%len(others)]
	}
	// The trigger that counts a workspace's runs locks its row until the
	// batch commits, so the hot workspace's runs go in small batches of a
	// writer of their own and the others' (a different workspace each) in
	// large ones from two more.
	var hot, cold []int
	for i := range o.size.runs {
		if workspaceOf(i) == o.hot {
			hot = append(hot, i)
		} else {
			cold = append(cold, i)
		}
	}
	type lane struct {
		indices []int
		batch   int
		next    *atomic.Int64
	}
	hotLane, coldLane := lane{hot, 50, new(atomic.Int64)}, lane{cold, batch, new(atomic.Int64)}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	var review atomic.Value
	for _, l := range []lane{hotLane, coldLane, coldLane} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				start := int(l.next.Add(int64(l.batch))) - l.batch
				if start >= len(l.indices) {
					errs <- nil
					return
				}
				var hs []cairnrun.History
				for _, i := range l.indices[start:min(start+l.batch, len(l.indices))] {
					ws := workspaceOf(i)
					h := seededRun(template, ws, cvs[ws], i, base.Add(time.Duration(i)*time.Second))
					hs = append(hs, h)
					if ws == o.hot {
						review.Store(h.Run.ID)
					}
				}
				// Each run's insert updates its workspace's run count and holds
				// that row to the commit; two writers taking the same
				// workspaces in different orders would deadlock, so every
				// batch takes them in one order.
				slices.SortFunc(hs, func(a, b cairnrun.History) int { return strings.Compare(a.Run.WorkspaceID, b.Run.WorkspaceID) })
				if err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) error { return cairnrun.SeedHistory(ctx, tx, hs) }); err != nil {
					errs <- fmt.Errorf("seeding runs: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	// The review read is of one of the hot workspace's runs.
	o.reviewRunID, _ = review.Load().(string)
	return nil
}

// seededRun is the i-th ended run of a seeded history, in workspace ws
// with configuration version cvID, created at at: a copy of the template
// with its plan attempt (and apply attempt when applied) and a three-chunk
// plan log.
func seededRun(template cairnrun.Run, ws, cvID string, i int, at time.Time) cairnrun.History {
	r := template
	r.ID, r.WorkspaceID, r.ConfigurationVersionID = id.New("run"), ws, cvID
	r.Message, r.CreatedAt, r.UpdatedAt = fmt.Sprintf("seeded run %d", i), at, at
	r.Kind, r.Status = cairnrun.KindPlanOnly, cairnrun.StatusPlannedAndFinished
	if i%3 == 0 {
		r.Kind, r.Status = cairnrun.KindPlanAndApply, cairnrun.StatusApplied
	}
	r.StatusTimestamps = cairnrun.Timestamps{string(cairnrun.StatusPending): at, string(r.Status): at.Add(40 * time.Second)}
	attempts := []cairnrun.Attempt{{ID: id.New("att"), OrganizationID: r.OrganizationID, RunID: r.ID,
		Phase: cairnrun.PhasePlan, Number: 1, Status: cairnrun.AttemptSucceeded, Region: r.Region, QueuedAt: at}}
	if r.Status == cairnrun.StatusApplied {
		attempts = append(attempts, cairnrun.Attempt{ID: id.New("att"), OrganizationID: r.OrganizationID, RunID: r.ID,
			Phase: cairnrun.PhaseApply, Number: 1, Status: cairnrun.AttemptSucceeded, Region: r.Region, QueuedAt: at.Add(20 * time.Second)})
	}
	return cairnrun.History{Run: r, Attempts: attempts, Log: []string{
		"Initializing the backend...\n", "terraform_data.x: Refreshing state...\n",
		fmt.Sprintf("Plan: %d to add, 0 to change, 0 to destroy.\n", i%7)}}
}

// seedStateVersions publishes stateVersions versions of the hot workspace
// as the CLI does: lock the workspace, then declare and upload each.
func seedStateVersions(ctx context.Context, conn *sqlx.DB, deps assembly.Deps, o *growthOrg) error {
	if err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) error {
		_, err := deps.Services.Workspaces.LockWorkspace(ctx, tx, o.principal, o.hot, "growth bench")
		return err
	}); err != nil {
		return fmt.Errorf("locking the hot workspace: %w", err)
	}
	lineage := "growth-" + o.hot
	for serial := 1; serial <= o.size.stateVersions; serial++ {
		body := []byte(fmt.Sprintf(`{"version":4,"terraform_version":"1.10.6","serial":%d,"lineage":%q,`+
			`"outputs":{"count":{"value":%d,"type":"number"}},"resources":[],"check_results":null}`, serial, lineage, serial))
		sum := md5.Sum(body)
		var v state.Version
		if err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) (err error) {
			v, err = deps.Services.State.Create(ctx, tx, o.principal, o.hot, state.CreateInput{
				Serial: int64(serial), MD5: hex.EncodeToString(sum[:]), Lineage: lineage})
			return err
		}); err != nil {
			return fmt.Errorf("declaring state version %d: %w", serial, err)
		}
		if _, err := deps.Services.State.Upload(ctx, v.ID, strings.NewReader(string(body))); err != nil {
			return fmt.Errorf("uploading state version %d: %w", serial, err)
		}
	}
	return nil
}

// seedAudit appends the organization's audit events in transactions of
// 2,000 from two writers, until the trail holds auditEvents.
func seedAudit(ctx context.Context, conn *sqlx.DB, o *growthOrg) error {
	actions := []string{"run.created", "run.approved", "workspace.updated", "variable.created", "state_version.finalized"}
	const batch = 2000
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				start := int(next.Add(batch)) - batch
				if start >= o.size.auditEvents {
					errs <- nil
					return
				}
				err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) error {
					for i := start; i < min(start+batch, o.size.auditEvents); i++ {
						ws := o.workspaceIDs[i%len(o.workspaceIDs)]
						if _, err := audit.Append(ctx, tx, audit.Entry{OrganizationID: o.principal.OrganizationID,
							Action: actions[i%len(actions)], Actor: audit.ActorOf(o.principal), TargetType: "workspace", TargetID: ws,
							Evidence: map[string]any{"workspace_id": ws, "sequence": i}}); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					errs <- fmt.Errorf("seeding audit events: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
