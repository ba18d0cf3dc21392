package trigger

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/id"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/workspace"
)

// Service holds the run-trigger use cases.
type Service struct {
	db         *sqlx.DB
	workspaces *workspace.Service
	runs       *run.Service
	logger     *slog.Logger
	now        func() time.Time
}

// NewService returns the run-trigger service.
func NewService(conn *sqlx.DB, workspaces *workspace.Service, runs *run.Service, logger *slog.Logger) *Service {
	return &Service{db: conn, workspaces: workspaces, runs: runs, logger: logger, now: time.Now}
}

func (s *Service) stamp() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// Create makes sourceWorkspaceID a source of workspaceID. It needs
// workspace:admin in the destination and run:read in the source (a source
// the principal cannot read that way is not found). The checks that
// depend on the organization's other triggers (the limit, duplicates,
// cycles) run under the organization's advisory lock.
func (s *Service) Create(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID, sourceWorkspaceID string) (Trigger, error) {
	dest, err := s.workspaces.WorkspaceForWrite(ctx, tx, p, workspaceID, access.PermWorkspaceAdmin)
	if err != nil {
		return Trigger{}, err
	}
	src, err := s.workspaces.WorkspaceWith(ctx, p, sourceWorkspaceID, access.PermRunRead)
	if errors.Is(err, fault.ErrForbidden) {
		err = fault.ErrNotFound
	}
	if err != nil {
		return Trigger{}, err
	}
	if src.ID == dest.ID {
		return Trigger{}, ErrSelf
	}
	if err := lockOrganization(ctx, tx, dest.OrganizationID); err != nil {
		return Trigger{}, err
	}
	sources, err := inbound(ctx, tx, dest.OrganizationID, dest.ID)
	if err != nil {
		return Trigger{}, err
	}
	for _, t := range sources {
		if t.SourceWorkspaceID == src.ID {
			return Trigger{}, ErrDuplicate
		}
	}
	if len(sources) >= MaxSources {
		return Trigger{}, ErrTooManySources
	}
	all, err := edges(ctx, tx, dest.OrganizationID)
	if err != nil {
		return Trigger{}, err
	}
	if path := CyclePath(all, src.ID, dest.ID); path != nil {
		return Trigger{}, s.cycleError(ctx, tx, p, path)
	}
	t := Trigger{ID: id.New("rt"), OrganizationID: dest.OrganizationID, WorkspaceID: dest.ID, WorkspaceName: dest.Name,
		WorkspaceCloudName: dest.CloudName, WorkspaceProjectID: dest.ProjectID, SourceWorkspaceID: src.ID,
		SourceName: src.Name, SourceCloudName: src.CloudName, SourceProjectID: src.ProjectID,
		CreatedByKind: p.Kind, CreatedByID: p.ID, CreatedAt: s.stamp()}
	if err := insertTrigger(ctx, tx, t); err != nil {
		return Trigger{}, err
	}
	return t, audit.Record(ctx, tx, p, "run_trigger.created", "run_trigger", t.ID,
		map[string]any{"workspace_id": t.WorkspaceID, "source_workspace_id": t.SourceWorkspaceID})
}

// cycleError names the loop by workspace names, except the workspaces the
// principal cannot read.
func (s *Service) cycleError(ctx context.Context, tx *sqlx.Tx, p access.Principal, path []string) error {
	names, err := workspaceNames(ctx, tx, p.OrganizationID, path)
	if err != nil {
		return err
	}
	shown := make([]string, len(path))
	for i, wid := range path {
		n := names[wid]
		shown[i] = "a workspace you cannot read"
		if p.CanReadWorkspace(n.ID, n.ProjectID) {
			shown[i] = n.Name
		}
	}
	return CycleError{Path: shown}
}

// Delete removes a trigger; it needs workspace:admin in its destination.
// A trigger of a destination the principal cannot read is not found.
func (s *Service) Delete(ctx context.Context, tx *sqlx.Tx, p access.Principal, triggerID string) (Trigger, error) {
	t, err := triggerByID(ctx, tx, p.OrganizationID, triggerID, true)
	if err != nil {
		return Trigger{}, err
	}
	if _, err := s.workspaces.WorkspaceForWrite(ctx, tx, p, t.WorkspaceID, access.PermWorkspaceAdmin); err != nil {
		return Trigger{}, err
	}
	if err := deleteTrigger(ctx, tx, t.ID); err != nil {
		return Trigger{}, err
	}
	return t, audit.Record(ctx, tx, p, "run_trigger.deleted", "run_trigger", t.ID,
		map[string]any{"workspace_id": t.WorkspaceID, "source_workspace_id": t.SourceWorkspaceID})
}

// Get reads a trigger whose destination the principal can read.
func (s *Service) Get(ctx context.Context, p access.Principal, triggerID string) (Trigger, error) {
	t, err := triggerByID(ctx, s.db, p.OrganizationID, triggerID, false)
	if err != nil {
		return Trigger{}, err
	}
	if p.RequireIn(t.WorkspaceID, t.WorkspaceProjectID, access.PermWorkspaceRead) != nil {
		return Trigger{}, fault.ErrNotFound
	}
	return t, nil
}

// Inbound lists a workspace's sources, oldest first: the triggers that
// make it run. Sources the principal cannot read are left out.
func (s *Service) Inbound(ctx context.Context, p access.Principal, workspaceID string) ([]Trigger, error) {
	w, err := s.workspaces.GetWorkspace(ctx, p, workspaceID)
	if err != nil {
		return nil, err
	}
	all, err := inbound(ctx, s.db, w.OrganizationID, w.ID)
	return readable(p, all, func(t Trigger) (string, string) { return t.SourceWorkspaceID, t.SourceProjectID }), err
}

// Outbound lists the triggers whose source is the workspace, oldest first:
// the workspaces it makes run. Destinations the principal cannot read are
// left out.
func (s *Service) Outbound(ctx context.Context, p access.Principal, workspaceID string) ([]Trigger, error) {
	w, err := s.workspaces.GetWorkspace(ctx, p, workspaceID)
	if err != nil {
		return nil, err
	}
	all, err := outbound(ctx, s.db, w.OrganizationID, w.ID)
	return readable(p, all, func(t Trigger) (string, string) { return t.WorkspaceID, t.WorkspaceProjectID }), err
}

// readable keeps the triggers whose other end the principal can read.
func readable(p access.Principal, ts []Trigger, other func(Trigger) (string, string)) []Trigger {
	out := make([]Trigger, 0, len(ts))
	for _, t := range ts {
		if p.CanReadWorkspace(other(t)) {
			out = append(out, t)
		}
	}
	return out
}

// Skip reasons: why a destination got no run from a source run.
const (
	SkipConfigurationNotReady = "configuration_not_ready"
	SkipAdmissionClosed       = "admission_closed"
	SkipRefused               = "run_refused"
)

// Fired is what one fan-out did: the runs it created (destination
// workspace → run) and the destinations it skipped (→ reason). A
// destination whose run an earlier attempt created is in Created too.
type Fired struct {
	Created map[string]string
	Skipped map[string]string
}

// Fire creates, for every current trigger of the applied run's workspace,
// one plan_and_apply run of the destination's current configuration, each
// in its own transaction and as the trigger's own principal. It is safe to
// call again for the same run: a destination that has its run keeps it. A
// destination that cannot start a run is skipped with an audit event
// saying why; other failures are returned for the job to retry.
func (s *Service) Fire(ctx context.Context, sourceRunID string) (Fired, error) {
	fired := Fired{Created: map[string]string{}, Skipped: map[string]string{}}
	src, err := s.runs.RunOwner(ctx, sourceRunID)
	if errors.Is(err, fault.ErrNotFound) {
		return fired, nil
	}
	if err != nil {
		return fired, err
	}
	if src.Status != run.StatusApplied || src.Speculative() {
		return fired, nil
	}
	triggers, err := outbound(ctx, s.db, src.OrganizationID, src.WorkspaceID)
	if err != nil {
		return fired, err
	}
	for _, t := range triggers {
		runID, reason, err := s.fireOne(ctx, t, src)
		switch {
		case err != nil:
			return fired, err
		case reason != "":
			fired.Skipped[t.WorkspaceID] = reason
		default:
			fired.Created[t.WorkspaceID] = runID
		}
	}
	return fired, nil
}

// fireOne creates the destination's run for src, or names why it cannot.
func (s *Service) fireOne(ctx context.Context, t Trigger, src run.Run) (string, string, error) {
	p := access.RunTrigger(t.OrganizationID, t.ID, t.WorkspaceID)
	var runID string
	err := db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		existing, err := run.TriggeredRun(ctx, tx, t.WorkspaceID, src.ID)
		if err != nil || existing != nil {
			if existing != nil {
				runID = *existing
			}
			return err
		}
		r, err := s.runs.CreateRun(ctx, tx, p, run.CreateInput{WorkspaceID: t.WorkspaceID, Kind: run.KindPlanAndApply,
			Message: Message(src.ID, t.SourceName), Source: run.SourceAPI, LatestConfiguration: true,
			TriggeredByRunID: src.ID})
		runID = r.ID
		return err
	})
	if db.IsUniqueViolation(err, "runs_triggered_once") {
		// Another attempt created it meanwhile.
		existing, err := run.TriggeredRun(ctx, s.db, t.WorkspaceID, src.ID)
		if err != nil || existing == nil {
			return "", "", err
		}
		return *existing, "", nil
	}
	reason := skipReason(err)
	if reason == "" {
		return runID, "", err
	}
	evidence := map[string]any{"source_run_id": src.ID, "source_workspace_id": src.WorkspaceID,
		"workspace_id": t.WorkspaceID, "reason": reason}
	err = db.WithTx(ctx, s.db, func(tx *sqlx.Tx) error {
		return audit.Record(ctx, tx, p, "run_trigger.skipped", "run_trigger", t.ID, evidence)
	})
	s.logger.InfoContext(ctx, "run trigger skipped", "run_id", src.ID, "workspace_id", t.WorkspaceID, "reason", reason)
	return "", reason, err
}

// skipReason names a refusal that retrying cannot change, or "" for
// success and for failures worth a retry.
func skipReason(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, run.ErrConfigurationNotReady):
		return SkipConfigurationNotReady
	case errors.Is(err, fault.ErrAdmissionClosed):
		return SkipAdmissionClosed
	case errors.Is(err, fault.ErrValidation), errors.Is(err, fault.ErrNotFound), errors.Is(err, fault.ErrForbidden),
		errors.Is(err, fault.ErrConflict):
		return SkipRefused
	}
	if _, ok := run.OptionErrorOf(err); ok {
		return SkipRefused
	}
	return ""
}
