package githubfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Check-run route patterns, for Inject, Hook and Calls.
const (
	RouteCreateCheckRun = "POST /repos/{owner}/{repo}/check-runs"
	RouteUpdateCheckRun = "PATCH /repos/{owner}/{repo}/check-runs/{id}"
	RouteListCheckRuns  = "GET /repos/{owner}/{repo}/commits/{ref}/check-runs"
)

// CheckRun is a check run as the fake stores it. History lists every state
// it was in, in order ("queued", "in_progress", "completed/success"...).
type CheckRun struct {
	ID     int64
	RepoID int64
	// AppID is the app that wrote the check: the fake's own for every
	// check created through the API, another for one Plant adds.
	AppID       int64
	Name        string
	HeadSHA     string
	ExternalID  string
	DetailsURL  string
	Status      string
	Conclusion  string
	StartedAt   *time.Time
	CompletedAt *time.Time
	Title       string
	Summary     string
	History     []string
	// Writes counts the create and every update that reached it.
	Writes int
}

func (c CheckRun) state() string {
	if c.Status == "completed" {
		return c.Status + "/" + c.Conclusion
	}
	return c.Status
}

// Checks is the fake's check-run API: create, update and the commit's
// paginated list, with the provider's validation and response shapes.
type Checks struct {
	s      *Server
	mu     sync.Mutex
	nextID int64
	runs   []*CheckRun
}

// AttachChecks adds the check-run API to a fake code host.
func AttachChecks(s *Server) *Checks {
	c := &Checks{s: s, nextID: 7_000_000_000}
	s.Handle(RouteCreateCheckRun, c.create)
	s.Handle(RouteUpdateCheckRun, c.update)
	s.Handle(RouteListCheckRuns, c.list)
	return c
}

// Runs returns a copy of the check runs of a commit, oldest first.
func (c *Checks) Runs(headSHA string) []CheckRun {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []CheckRun
	for _, r := range c.runs {
		if r.HeadSHA == headSHA {
			cp := *r
			cp.History = append([]string(nil), r.History...)
			out = append(out, cp)
		}
	}
	return out
}

// Plant adds a check run another app wrote (AppID other than the fake's),
// as the provider would list it beside ours, and returns its ID.
func (c *Checks) Plant(run CheckRun) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	run.ID = c.nextID
	if run.Status == "" {
		run.Status = "queued"
	}
	run.History = []string{run.state()}
	c.runs = append(c.runs, &run)
	return run.ID
}

// checkInput is the body of a create or an update.
type checkInput struct {
	Name        *string    `json:"name"`
	HeadSHA     *string    `json:"head_sha"`
	DetailsURL  *string    `json:"details_url"`
	ExternalID  *string    `json:"external_id"`
	Status      *string    `json:"status"`
	Conclusion  *string    `json:"conclusion"`
	StartedAt   *time.Time `json:"started_at"`
	CompletedAt *time.Time `json:"completed_at"`
	Output      *struct {
		Title   *string `json:"title"`
		Summary *string `json:"summary"`
	} `json:"output"`
}

var (
	checkStatuses    = map[string]bool{"queued": true, "in_progress": true, "completed": true}
	checkConclusions = map[string]bool{"action_required": true, "cancelled": true, "failure": true, "neutral": true,
		"success": true, "skipped": true, "stale": true, "timed_out": true}
)

func unprocessable(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": msg,
		"documentation_url": "https://docs.github.com/rest/checks/runs"})
}

// apply validates in and writes it to r, as the provider does: a
// conclusion completes the run; completing needs a conclusion.
func apply(w http.ResponseWriter, r *CheckRun, in checkInput) bool {
	next := *r
	if in.Name != nil {
		next.Name = *in.Name
	}
	if in.DetailsURL != nil {
		next.DetailsURL = *in.DetailsURL
	}
	if in.ExternalID != nil {
		next.ExternalID = *in.ExternalID
	}
	if in.Status != nil {
		if !checkStatuses[*in.Status] {
			unprocessable(w, "Invalid request.\n\nNo subschema in \"anyOf\" matched.")
			return false
		}
		next.Status = *in.Status
	}
	if in.Conclusion != nil {
		if !checkConclusions[*in.Conclusion] {
			unprocessable(w, "Invalid request.\n\nNo subschema in \"anyOf\" matched.")
			return false
		}
		next.Conclusion, next.Status = *in.Conclusion, "completed"
	}
	if next.Status == "completed" && next.Conclusion == "" {
		unprocessable(w, "Invalid request.\n\n\"conclusion\" wasn't supplied.")
		return false
	}
	if next.Status != "completed" {
		next.Conclusion, next.CompletedAt = "", nil
	}
	if in.StartedAt != nil {
		next.StartedAt = in.StartedAt
	}
	if in.CompletedAt != nil && next.Status == "completed" {
		next.CompletedAt = in.CompletedAt
	}
	if next.Status == "completed" && next.CompletedAt == nil {
		now := time.Now().UTC().Truncate(time.Second)
		next.CompletedAt = &now
	}
	if in.Output != nil {
		if in.Output.Title == nil || in.Output.Summary == nil {
			unprocessable(w, "Invalid request.\n\n\"title\", \"summary\" weren't supplied.")
			return false
		}
		next.Title, next.Summary = *in.Output.Title, *in.Output.Summary
	}
	if next.Name == "" {
		unprocessable(w, "Invalid request.\n\n\"name\" wasn't supplied.")
		return false
	}
	if len(next.History) == 0 || next.History[len(next.History)-1] != next.state() {
		next.History = append(next.History, next.state())
	}
	next.Writes++
	*r = next
	return true
}

func decodeCheck(w http.ResponseWriter, r *http.Request) (checkInput, bool) {
	var in checkInput
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Problems parsing JSON",
			"documentation_url": "https://docs.github.com/rest/checks/runs"})
		return in, false
	}
	return in, true
}

// POST /repos/{owner}/{repo}/check-runs
func (c *Checks) create(w http.ResponseWriter, r *http.Request) {
	inst, ok := c.s.InstallationOf(w, r)
	if !ok {
		return
	}
	repo, ok := c.s.RepositoryOf(w, r, inst)
	if !ok {
		return
	}
	in, ok := decodeCheck(w, r)
	if !ok {
		return
	}
	if in.HeadSHA == nil {
		unprocessable(w, "Invalid request.\n\n\"head_sha\" wasn't supplied.")
		return
	}
	c.s.mu.Lock()
	commit := c.s.commits[*in.HeadSHA]
	c.s.mu.Unlock()
	if commit == nil || commit.RepoID != repo.ID {
		unprocessable(w, "No commit found for SHA: "+*in.HeadSHA)
		return
	}
	run := CheckRun{RepoID: repo.ID, AppID: c.s.AppID, HeadSHA: *in.HeadSHA, Status: "queued"}
	if !apply(w, &run, in) {
		return
	}
	c.mu.Lock()
	c.nextID++
	run.ID = c.nextID
	stored := run
	c.runs = append(c.runs, &stored)
	c.mu.Unlock()
	writeJSON(w, http.StatusCreated, c.checkRunJSON(r, repo, run))
}

// PATCH /repos/{owner}/{repo}/check-runs/{id}
func (c *Checks) update(w http.ResponseWriter, r *http.Request) {
	inst, ok := c.s.InstallationOf(w, r)
	if !ok {
		return
	}
	repo, ok := c.s.RepositoryOf(w, r, inst)
	if !ok {
		return
	}
	in, ok := decodeCheck(w, r)
	if !ok {
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	c.mu.Lock()
	var found *CheckRun
	for _, run := range c.runs {
		// An app updates only its own checks.
		if run.ID == id && run.RepoID == repo.ID && run.AppID == c.s.AppID {
			found = run
		}
	}
	if found == nil {
		c.mu.Unlock()
		notFound(w)
		return
	}
	ok = apply(w, found, in)
	out := *found
	c.mu.Unlock()
	if ok {
		writeJSON(w, http.StatusOK, c.checkRunJSON(r, repo, out))
	}
}

// GET /repos/{owner}/{repo}/commits/{ref}/check-runs: newest first,
// filtered by check_name, status and app_id; filter=latest (the default)
// keeps the newest run of each name, filter=all keeps every one.
func (c *Checks) list(w http.ResponseWriter, r *http.Request) {
	inst, ok := c.s.InstallationOf(w, r)
	if !ok {
		return
	}
	repo, ok := c.s.RepositoryOf(w, r, inst)
	if !ok {
		return
	}
	q := r.URL.Query()
	filter := q.Get("filter")
	if filter == "" {
		filter = "latest"
	}
	if filter != "latest" && filter != "all" {
		unprocessable(w, "Invalid request.\n\n\"filter\" must be one of latest, all.")
		return
	}
	sha := r.PathValue("ref")
	if commit, ok := c.s.resolve(repo, sha); ok {
		sha = commit.SHA
	}
	c.mu.Lock()
	var matched []CheckRun
	newest := map[string]bool{}
	for i := len(c.runs) - 1; i >= 0; i-- {
		run := c.runs[i]
		if run.RepoID != repo.ID || run.HeadSHA != sha ||
			(q.Has("check_name") && run.Name != q.Get("check_name")) || (q.Has("status") && run.Status != q.Get("status")) ||
			(q.Has("app_id") && strconv.FormatInt(run.AppID, 10) != q.Get("app_id")) {
			continue
		}
		if filter == "latest" && newest[run.Name] {
			continue
		}
		newest[run.Name] = true
		matched = append(matched, *run)
	}
	c.mu.Unlock()
	sort.SliceStable(matched, func(i, j int) bool { return matched[i].ID > matched[j].ID })
	_, lo, hi := paginate(w, r, len(matched), 30)
	items := make([]any, 0, hi-lo)
	for _, run := range matched[lo:hi] {
		items = append(items, c.checkRunJSON(r, repo, run))
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(matched), "check_runs": items})
}

func stamp(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// checkRunJSON is the provider's check-run object.
func (c *Checks) checkRunJSON(r *http.Request, repo Repository, run CheckRun) map[string]any {
	api := fmt.Sprintf("http://%s/repos/%s/check-runs/%d", r.Host, repo.FullName(), run.ID)
	return map[string]any{
		"id": run.ID, "node_id": "CR_" + strconv.FormatInt(run.ID, 10), "head_sha": run.HeadSHA,
		"external_id": run.ExternalID, "url": api,
		"html_url":    fmt.Sprintf("https://github.com/%s/runs/%d", repo.FullName(), run.ID),
		"details_url": nullable(run.DetailsURL), "status": run.Status, "conclusion": nullable(run.Conclusion),
		"started_at": stamp(run.StartedAt), "completed_at": stamp(run.CompletedAt),
		"output": map[string]any{"title": nullable(run.Title), "summary": nullable(run.Summary), "text": nil,
			"annotations_count": 0, "annotations_url": api + "/annotations"},
		"name":          run.Name,
		"check_suite":   map[string]any{"id": run.ID/1000 + 1},
		"app":           c.appJSON(run.AppID),
		"pull_requests": []any{},
	}
}

// appJSON is the provider's app object of a check run.
func (c *Checks) appJSON(appID int64) map[string]any {
	if appID == c.s.AppID {
		return map[string]any{"id": appID, "slug": "cairn-test", "name": "Cairn (test)"}
	}
	return map[string]any{"id": appID, "slug": fmt.Sprintf("other-app-%d", appID), "name": "Another app"}
}
