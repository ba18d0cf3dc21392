package tfe

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/run"
)

// logURLLifetime is how long a signed log URL works; the CLI rereads it
// for as long as a phase runs.
const logURLLifetime = 6 * time.Hour

// Log framing of the protocol: STX opens a phase log, ETX closes it once
// the phase has ended.
const (
	stx = 0x02
	etx = 0x03
)

// registerPhases registers a run's phases: plans (with the plan's JSON
// export) and applies, and their logs.
func (s *server) registerPhases(r fiber.Router) {
	r.Get("/plans/:id", s.guard(s.byPhase("plan_"), s.readPhase(run.PhasePlan)))
	r.Get("/plans/:id/json-output", s.guard(s.byPhase("plan_"), s.planJSON))
	r.Get("/plans/:id/json-output-redacted", s.guard(s.byPhase("plan_"), s.redactedPlanJSON))
	r.Get("/applies/:id", s.guard(s.byPhase("apply_"), s.readPhase(run.PhaseApply)))
	r.Get("/runs/:id/logs/:phase/:expires/:signature", s.phaseLog)
}

// Phase objects (plans, applies) are views of a run; their IDs carry the
// run's own random part, so no extra records are needed.
func phaseID(prefix, runID string) string { return prefix + strings.TrimPrefix(runID, "run_") }

func runIDOf(prefix, phaseID string) string { return "run_" + strings.TrimPrefix(phaseID, prefix) }

func (s *server) byPhase(prefix string) resolver {
	return func(ctx context.Context, c *fiber.Ctx, p access.Principal) (owner, error) {
		if !strings.HasPrefix(c.Params("id"), prefix) {
			return owner{}, nil
		}
		return s.runOwner(ctx, p, runIDOf(prefix, c.Params("id")))
	}
}

// phaseStatus maps a phase status; a phase that never ran in a finished
// run is unreachable.
func phaseStatus(r run.Run, st string) string {
	switch {
	case st == run.PhasePending && r.Status.Terminal():
		return "unreachable"
	case st == run.PhaseInterrupted:
		return "errored"
	}
	return st
}

func (s *server) readPhase(phase string) handler {
	return func(c *fiber.Ctx, p access.Principal, o owner) error {
		prefix := "plan_"
		if phase == run.PhaseApply {
			prefix = "apply_"
		}
		r, err := s.Runs.GetRun(c.UserContext(), p, runIDOf(prefix, c.Params("id")))
		if err != nil {
			return s.writeError(c, err)
		}
		return writeData(c, http.StatusOK, s.phaseResource(r, phase))
	}
}

// phaseEnds are the run statuses that end each phase well: the first one
// the run entered after the phase started is when the phase finished.
var phaseEnds = map[string][]run.Status{
	run.PhasePlan: {run.StatusAwaitingApproval, run.StatusPolicyOverride, run.StatusPolicySoftFailed, run.StatusPlannedAndFinished,
		run.StatusApplyQueued},
	run.PhaseApply: {run.StatusApplied},
}

// phaseStamps are a phase's status timestamps, read from the run's own.
func phaseStamps(r run.Run, phase, status string) map[string]string {
	queued, started := run.StatusPlanQueued, run.StatusPlanning
	if phase == run.PhaseApply {
		queued, started = run.StatusApplyQueued, run.StatusApplying
	}
	out := map[string]string{}
	at := func(key string, st run.Status) {
		if t, ok := r.StatusTimestamps[string(st)]; ok {
			out[key] = timestamp(t)
		}
	}
	at("queued-at", queued)
	at("started-at", started)
	switch status {
	case run.PhaseFinished:
		var first *time.Time
		for _, st := range phaseEnds[phase] {
			if t, ok := r.StatusTimestamps[string(st)]; ok && (first == nil || t.Before(*first)) {
				first = &t
			}
		}
		if first != nil {
			out["finished-at"] = timestamp(*first)
		}
	case run.PhaseErrored, run.PhaseInterrupted:
		at("errored-at", run.StatusErrored)
	case run.PhaseCanceled:
		at("canceled-at", run.StatusCanceled)
	}
	return out
}

// phaseResource is a run's plan or apply as the protocol shows it.
func (s *server) phaseResource(r run.Run, phase string) resource {
	prefix, typ, raw := "plan_", "plans", protocolPlanStatus(r)
	if phase == run.PhaseApply {
		prefix, typ, raw = "apply_", "applies", r.ApplyStatus
	}
	count := func(n *int) int {
		if n == nil {
			return 0
		}
		return *n
	}
	logPath := "/api/v2/runs/" + r.ID + "/logs/" + phase
	expires := time.Now().Add(logURLLifetime).Unix()
	logURL := fmt.Sprintf("%s/%d/%s", s.absolute(logPath), expires, s.Capabilities.Sign(http.MethodGet, logPath, expires))
	attrs := map[string]any{
		"status": phaseStatus(r, raw), "log-read-url": logURL, "has-changes": r.HasChanges != nil && *r.HasChanges,
		"resource-additions": count(r.ResourceAdditions), "resource-changes": count(r.ResourceChanges),
		"resource-destructions": count(r.ResourceDestructions), "resource-imports": 0, "generated-configuration": false,
		"status-timestamps": phaseStamps(r, phase, raw),
	}
	return resource{ID: phaseID(prefix, r.ID), Type: typ, Attributes: attrs}
}

// phaseLog serves a phase's sanitized log at its signed URL. The CLI
// replaces the query with limit and offset, so the signature lives in the
// path. STX opens the log; ETX closes it only once the phase has ended, so
// the CLI stops reading exactly when there is nothing more to come.
func (s *server) phaseLog(c *fiber.Ctx) error {
	ctx := c.UserContext()
	phase := c.Params("phase")
	path := "/api/v2/runs/" + c.Params("id") + "/logs/" + phase
	if (phase != run.PhasePlan && phase != run.PhaseApply) || !s.validSignature(http.MethodGet, path, c.Params("expires"), c.Params("signature")) {
		return s.writeError(c, fault.ErrNotFound)
	}
	r, err := s.Runs.RunOwner(ctx, c.Params("id"))
	if err != nil {
		return s.writeError(c, err)
	}
	// A log is a read: the gate applies, a suspension does not.
	subject := launch.Subject{OrganizationID: r.OrganizationID, WorkspaceID: r.WorkspaceID}
	if _, err := s.Launch.RequireBy(ctx, nil, subject, launch.AdmitAccess); err != nil {
		return s.writeError(c, err)
	}
	status := protocolPlanStatus(r)
	if phase == run.PhaseApply {
		status = r.ApplyStatus
	}
	ended := status != run.PhasePending && status != run.PhaseRunning || r.Status.Terminal()
	w := newLogWindow(c.Query("offset"), c.Query("limit"))
	rng, err := s.Runs.OpenPhaseLog(ctx, r, phase, w.logFrom, w.logTo)
	if err != nil {
		return s.writeError(c, err)
	}
	withSTX, withETX := w.frame(rng.Size, rng.Total, ended)
	var head, tail []byte
	if withSTX {
		head = []byte{stx}
	}
	if withETX {
		tail = []byte{etx}
	}
	c.Set(fiber.HeaderContentType, "text/plain")
	c.Set(fiber.HeaderCacheControl, "private, no-store")
	c.Status(http.StatusOK)
	body := io.MultiReader(bytes.NewReader(head), rng, bytes.NewReader(tail))
	return c.SendStream(readCloser{body, rng}, len(head)+int(rng.Size)+len(tail))
}

// logWindow is the part of a framed phase log (STX, the log, and ETX once
// the phase has ended) the CLI asked for: limit bytes from offset, both
// clamped to the framed log; a missing or non-positive limit means the
// rest. The log's length is not known up front, so the window is first
// turned into a range of the log itself, and framed once that is read.
type logWindow struct {
	offset, limit  int64 // limit < 0: to the end
	logFrom, logTo int64 // logTo < 0: to the end
}

func newLogWindow(offset, limit string) logWindow {
	w := logWindow{limit: -1}
	w.offset, _ = strconv.ParseInt(offset, 10, 64)
	w.offset = max(w.offset, 0)
	if n, err := strconv.ParseInt(limit, 10, 64); err == nil && n > 0 {
		w.limit = n
	}
	// Framed byte i > 0 is log byte i-1.
	w.logFrom, w.logTo = max(w.offset-1, 0), -1
	if w.limit >= 0 {
		// Compared with what is left rather than added, which a huge limit
		// would overflow.
		want := w.limit
		if w.offset == 0 {
			want--
		}
		if want <= math.MaxInt64-w.logFrom {
			w.logTo = w.logFrom + want
		}
	}
	return w
}

// frame says whether STX and ETX belong to the window, given how many log
// bytes it got of a log total bytes long.
func (w logWindow) frame(got, total int64, ended bool) (withSTX, withETX bool) {
	withSTX = w.offset == 0
	used := got
	if withSTX {
		used++
	}
	withETX = ended && w.offset <= 1+total && w.logFrom+got >= total && (w.limit < 0 || used < w.limit)
	return withSTX, withETX
}

// planJSON streams the machine-readable plan, which holds sensitive
// values in clear: it needs artifact:read_sensitive (403 otherwise; a run
// token never has it) for a run inside the principal's exact boundary, and
// its audit record is committed before the first byte.
func (s *server) planJSON(c *fiber.Ctx, p access.Principal, o owner) error {
	d, err := s.Runs.ExportPlanJSON(c.UserContext(), p, runIDOf("plan_", c.Params("id")), o.WorkspaceID)
	if err != nil {
		return s.writeError(c, err)
	}
	return sendPlanJSON(c, d)
}

// redactedPlanJSON streams a saved plan's redacted JSON plan, which
// OpenTofu's cloud backend renders for `tofu show` of a saved cloud plan;
// it needs run:read only. Other plans have none: not found.
func (s *server) redactedPlanJSON(c *fiber.Ctx, p access.Principal, o owner) error {
	d, err := s.Runs.RedactedPlanJSON(c.UserContext(), p, runIDOf("plan_", c.Params("id")), o.WorkspaceID)
	if err != nil {
		return s.writeError(c, err)
	}
	return sendPlanJSON(c, d)
}

// sendPlanJSON streams an opened plan export with its exact length, never
// cached. fasthttp copies the verifying reader to the connection in fixed
// buffers and closes it; a body that fails verification breaks the
// connection off short of that length.
func sendPlanJSON(c *fiber.Ctx, d run.Download) error {
	c.Set(fiber.HeaderContentType, "application/json")
	c.Set(fiber.HeaderCacheControl, "private, no-store")
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Status(http.StatusOK)
	c.Context().SetBodyStream(d.Body, int(d.Size))
	return nil
}

type readCloser struct {
	io.Reader
	io.Closer
}
