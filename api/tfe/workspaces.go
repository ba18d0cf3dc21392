package tfe

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/gofiber/fiber/v2"
	"github.com/jmoiron/sqlx"
	"golang.org/x/sync/errgroup"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/state"
	"github.com/cairnhq/cairn/api/workspace"
)

func (s *server) registerWorkspaces(r fiber.Router) {
	r.Get("/organizations/:org/workspaces/:name", s.guard(s.byWorkspaceName, s.readWorkspace))
	r.Patch("/organizations/:org/workspaces/:name", s.guard(s.byWorkspaceName, s.updateWorkspace))
	r.Delete("/organizations/:org/workspaces/:name", s.guardStop(s.byWorkspaceName, s.deleteWorkspace))
	r.Post("/organizations/:org/workspaces", s.guard(s.byOrganization, s.createWorkspace))
	r.Get("/workspaces/:id", s.guard(s.byWorkspaceID, s.readWorkspace))
	r.Patch("/workspaces/:id", s.guard(s.byWorkspaceID, s.updateWorkspace))
	r.Delete("/workspaces/:id", s.guardStop(s.byWorkspaceID, s.deleteWorkspace))
	r.Post("/workspaces/:id/actions/lock", s.guard(s.byWorkspaceID, s.lockWorkspace))
	r.Post("/workspaces/:id/actions/unlock", s.guardStop(s.byWorkspaceID, s.unlockWorkspace))
	r.Post("/workspaces/:id/actions/force-unlock", s.guardStop(s.byWorkspaceID, s.forceUnlockWorkspace))
	r.Post("/workspaces/:id/actions/safe-delete", s.guardStop(s.byWorkspaceID, s.safeDeleteWorkspace))
	r.Post("/organizations/:org/workspaces/:name/actions/safe-delete", s.guardStop(s.byWorkspaceName, s.safeDeleteWorkspace))
	s.registerWorkspaceList(r)
}

// workspaceResource renders a workspace the way Terraform-compatible
// clients read it: its name is the cloud name, execution is local until
// Cairn runs operations, and destroy plans are never offered.
func (s *server) workspaceResource(ctx context.Context, p access.Principal, o owner, w workspace.Workspace) (resource, error) {
	g, gctx := errgroup.WithContext(ctx)
	var f workspaceFacts
	s.readWorkspaceFacts(gctx, g, p, w.OrganizationID, w.ID, &f)
	if err := g.Wait(); err != nil {
		return resource{}, err
	}
	return workspaceRepresentation(p, o, w, f), nil
}

// workspaceFacts are what a workspace's representation reads beside the
// workspace itself.
type workspaceFacts struct {
	currentSV, currentRun, latestRun, currentCV string
	resourceCount, runCount                     int
	// tags are the workspace's tags, by name.
	tags []workspace.Tag
}

// readWorkspaceFacts starts the reads behind a workspace's representation
// in g: the CLI reads its workspace several times per command, and these
// go out at once.
func (s *server) readWorkspaceFacts(ctx context.Context, g *errgroup.Group, p access.Principal, organizationID, workspaceID string, f *workspaceFacts) {
	g.Go(func() error {
		tags, err := workspace.TagsOf(ctx, s.DB, organizationID, []string{workspaceID})
		f.tags = tags[workspaceID]
		return err
	})
	// Fetched when the principal holds the permission anywhere, before the
	// workspace is loaded; workspaceRepresentation drops what it may not
	// see in this workspace.
	if p.Require(access.PermStateRead) == nil {
		g.Go(func() error {
			cur, err := s.State.CurrentOfWorkspace(ctx, organizationID, workspaceID)
			if cur != nil {
				f.currentSV, f.resourceCount = cur.ID, cur.ResourceCount
			}
			return err
		})
	}
	if p.Require(access.PermRunRead) == nil {
		g.Go(func() error {
			cur, err := s.Runs.CurrentRun(ctx, organizationID, workspaceID)
			if cur != nil {
				f.currentRun = cur.ID
			}
			return err
		})
		g.Go(func() (err error) {
			f.runCount, f.latestRun, err = s.Runs.WorkspaceRuns(ctx, organizationID, workspaceID)
			return err
		})
		g.Go(func() error {
			cv, err := s.Runs.CurrentConfiguration(ctx, organizationID, workspaceID)
			if cv != nil {
				f.currentCV = cv.ID
			}
			return err
		})
	}
}

func workspaceRepresentation(p access.Principal, o owner, w workspace.Workspace, f workspaceFacts) resource {
	// What the principal may do in this workspace: its baseline and its
	// teams' grants here, not the baseline alone.
	has := p.PermissionsIn(w.ID, w.ProjectID).Has
	if !has(access.PermStateRead) {
		f.currentSV, f.resourceCount = "", 0
	}
	if !has(access.PermRunRead) {
		f.currentRun, f.latestRun, f.currentCV, f.runCount = "", "", "", 0
	}
	currentSV, currentRun, latestRun, currentCV := f.currentSV, f.currentRun, f.latestRun, f.currentCV
	resourceCount, runCount := f.resourceCount, f.runCount
	tagNames := make([]string, len(f.tags))
	for i, t := range f.tags {
		tagNames[i] = t.Name
	}
	lockedBy := relationship{Data: nil}
	if w.Locked() {
		// Every holder but a run and a team token is presented as a
		// user: the protocol knows only users, teams and runs.
		typ := "users"
		switch *w.LockedByKind {
		case access.KindRun:
			typ = "runs"
		case access.KindTeam:
			typ = "teams"
		}
		lockedBy = toOne(*w.LockedByID, typ)
	}
	self := "/api/v2/organizations/" + o.OrganizationSlug + "/workspaces/" + w.CloudName
	return resource{
		ID:   w.ID,
		Type: "workspaces",
		Attributes: map[string]any{
			"name":                          w.CloudName,
			"description":                   w.Name,
			"execution-mode":                w.ExecutionMode,
			"global-remote-state":           w.GlobalRemoteState,
			"operations":                    w.ExecutionMode == workspace.ExecutionRemote,
			"terraform-version":             workspace.ToProtocol(w.ToolVersion),
			"locked":                        w.Locked(),
			"created-at":                    timestamp(w.CreatedAt),
			"updated-at":                    timestamp(w.UpdatedAt),
			"auto-apply":                    false,
			"allow-destroy-plan":            false,
			"can-queue-destroy-plan":        false,
			"structured-run-output-enabled": false,
			"source":                        "tfe-api",
			"working-directory":             "",
			"tag-names":                     tagNames,
			"environment":                   "default",
			"run-count":                     runCount,
			// go-tfe reads the run count under this name.
			"workspace-kpis-runs-count": runCount,
			"resource-count":            resourceCount,
			"actions":                   map[string]bool{"is-destroyable": has(access.PermWorkspaceAdmin)},
			"setting-overwrites":        map[string]bool{"execution-mode": true, "agent-pool": true},
			"permissions": map[string]bool{
				"can-update":                has(access.PermWorkspaceWrite),
				"can-destroy":               has(access.PermWorkspaceAdmin),
				"can-force-delete":          has(access.PermWorkspaceAdmin),
				"can-queue-run":             has(access.PermRunCreate),
				"can-queue-apply":           has(access.PermRunApprove),
				"can-queue-destroy":         false,
				"can-lock":                  has(access.PermStateWrite),
				"can-unlock":                has(access.PermStateWrite),
				"can-force-unlock":          has(access.PermStateForceUnlock),
				"can-read-settings":         has(access.PermWorkspaceRead),
				"can-read-state-versions":   has(access.PermStateRead),
				"can-create-state-versions": has(access.PermStateWrite),
				"can-update-variable":       has(access.PermVariableWrite),
			},
		},
		Relationships: map[string]relationship{
			"organization":                  toOne(o.OrganizationSlug, "organizations"),
			"project":                       toOne(w.ProjectID, "projects"),
			"locked-by":                     lockedBy,
			"current-state-version":         toOne(currentSV, "state-versions"),
			"current-run":                   toOne(currentRun, "runs"),
			"latest-run":                    toOne(latestRun, "runs"),
			"current-configuration-version": toOne(currentCV, "configuration-versions"),
		},
		Links: map[string]string{"self": self, "self-html": "/app/" + o.OrganizationSlug + "/workspaces/" + w.CloudName},
	}
}

func (s *server) respondWorkspace(c *fiber.Ctx, status int, p access.Principal, o owner, w workspace.Workspace) error {
	res, err := s.workspaceResource(c.UserContext(), p, o, w)
	if err == nil {
		err = s.addVars(c.UserContext(), p, w.ID, &res)
	}
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, status, res)
}

// addVars adds the workspace's variables as its "vars" relationship (go-tfe's
// Workspace.Variables), for whoever may read them; for anyone else it is
// left out.
func (s *server) addVars(ctx context.Context, p access.Principal, workspaceID string, res *resource) error {
	vars, err := s.Workspaces.ListVariables(ctx, p, workspaceID)
	switch {
	case errors.Is(err, fault.ErrForbidden) || errors.Is(err, fault.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	refs := make([]ref, len(vars))
	for i, v := range vars {
		refs[i] = ref{ID: v.ID, Type: "vars"}
	}
	res.Relationships["vars"] = relationship{Data: refs}
	return nil
}

func (s *server) readWorkspace(c *fiber.Ctx, p access.Principal, o owner) error {
	ctx := c.UserContext()
	// The workspace is read beside the rest of its representation; the
	// rest is dropped unless the principal may see it.
	g, gctx := errgroup.WithContext(ctx)
	var w workspace.Workspace
	var f workspaceFacts
	g.Go(func() (err error) { w, err = s.Workspaces.GetWorkspace(gctx, p, o.WorkspaceID); return err })
	s.readWorkspaceFacts(gctx, g, p, o.OrganizationID, o.WorkspaceID, &f)
	if err := g.Wait(); err != nil {
		return s.writeError(c, err)
	}
	res := workspaceRepresentation(p, o, w, f)
	if err := s.addVars(ctx, p, w.ID, &res); err != nil {
		return s.writeError(c, err)
	}
	doc := map[string]any{"data": res}
	// include=outputs adds the current state's outputs; other include
	// values are ignored rather than refused.
	if includes(c, "outputs") {
		outputs, err := s.currentStateOutputs(c, p, w.ID)
		if err != nil {
			return s.writeError(c, err)
		}
		refs := make([]ref, len(outputs))
		included := make([]resource, len(outputs))
		for i, out := range outputs {
			refs[i] = ref{ID: out.ID, Type: "workspace-outputs"}
			included[i] = workspaceOutputResource(out)
		}
		res.Relationships["outputs"] = relationship{Data: refs}
		if len(included) > 0 {
			doc["included"] = included
		}
	}
	return writeDocument(c, http.StatusOK, doc)
}

// workspaceOutputResource is an output as a workspace shows it; like every
// output rendering it never carries a sensitive value.
func workspaceOutputResource(o state.Output) resource {
	attrs := map[string]any{"name": o.Name, "sensitive": o.Sensitive, "output-type": state.OutputKind(o.TypeJSON), "value": nil}
	if !o.Sensitive {
		attrs["value"] = json.RawMessage(*o.ValueJSON)
	}
	return resource{ID: o.ID, Type: "workspace-outputs", Attributes: attrs}
}

// workspaceAttributes are the workspace attributes Cairn accepts from
// remote-backend clients; others are ignored.
type workspaceAttributes struct {
	Name             *string `json:"name"`
	ExecutionMode    *string `json:"execution-mode"`
	TerraformVersion *string `json:"terraform-version"`
	AutoApply        *bool   `json:"auto-apply"`
	// AutoApplyRunTrigger would apply runs a run trigger queued without
	// approval: refused like auto-apply.
	AutoApplyRunTrigger *bool `json:"auto-apply-run-trigger"`
	// GlobalRemoteState shares the workspace's state with every workspace
	// of the organization (remote-state consumers otherwise).
	GlobalRemoteState *bool `json:"global-remote-state"`
	// These ask for health assessments (drift scans) and scheduled
	// destroy runs, which Cairn does not run (SPEC §1): only their off
	// values are accepted.
	AssessmentsEnabled          *bool   `json:"assessments-enabled"`
	AutoDestroyAt               *string `json:"auto-destroy-at"`
	AutoDestroyActivityDuration *string `json:"auto-destroy-activity-duration"`
	// AllowDestroyPlan may only be false: see refuseDestroyPlan.
	AllowDestroyPlan *bool `json:"allow-destroy-plan"`
}

// refused is why a workspace create or update asks for what Cairn never
// does, or nil.
func (a workspaceAttributes) refused() error {
	switch {
	case (a.AutoApply != nil && *a.AutoApply) || (a.AutoApplyRunTrigger != nil && *a.AutoApplyRunTrigger):
		return errAutoApply
	case (a.AssessmentsEnabled != nil && *a.AssessmentsEnabled) || (a.AutoDestroyAt != nil && *a.AutoDestroyAt != "") ||
		(a.AutoDestroyActivityDuration != nil && *a.AutoDestroyActivityDuration != ""):
		return errNotRun
	}
	return nil
}

type workspaceDocument struct {
	Data struct {
		Type          string              `json:"type"`
		Attributes    workspaceAttributes `json:"attributes"`
		Relationships struct {
			// Project places a new workspace in a project; without it the
			// workspace lands in the default project.
			Project *struct {
				Data *ref `json:"data"`
			} `json:"project"`
			// Tags are bound to a new workspace, by ID or name.
			Tags *struct {
				Data []struct {
					ID         string `json:"id"`
					Attributes struct {
						Name string `json:"name"`
					} `json:"attributes"`
				} `json:"data"`
			} `json:"tags"`
		} `json:"relationships"`
	} `json:"data"`
}

// settingsFor returns execution settings with the requested tool version
// (the protocol's bare version, see workspace.ToolVersions.FromProtocol),
// keeping the current one when none is requested; a new workspace gets the
// first OpenTofu version.
func (s *server) settingsFor(current workspace.ExecutionSettings, version *string) (workspace.ExecutionSettings, error) {
	settings := current
	if settings.Region == "" {
		settings = workspace.ExecutionSettings{ToolVersion: s.Config.ToolVersions[0], Region: "us", Platform: "linux_amd64"}
	}
	if version != nil {
		pinned, err := s.tools().FromProtocol(*version)
		if err != nil {
			return settings, err
		}
		settings.ToolVersion = pinned
	}
	return settings, nil
}

// tools are the tool versions the operator offers.
func (s *server) tools() workspace.ToolVersions {
	return workspace.ToolVersions{OpenTofu: s.Config.ToolVersions, Terraform: s.Config.TerraformVersions}
}

func (s *server) createWorkspace(c *fiber.Ctx, p access.Principal, o owner) error {
	var doc workspaceDocument
	if err := decodeDocument(c, &doc); err != nil {
		return s.writeError(c, err)
	}
	a := doc.Data.Attributes
	if doc.Data.Type != "workspaces" || a.Name == nil {
		return s.writeError(c, errInvalidDocument)
	}
	if err := a.refused(); err != nil {
		return s.writeError(c, err)
	}
	settings, err := s.settingsFor(workspace.ExecutionSettings{}, a.TerraformVersion)
	if err != nil {
		return s.writeError(c, err)
	}
	if err := refuseDestroyPlan(a); err != nil {
		return s.writeError(c, err)
	}
	ctx := c.UserContext()
	var w workspace.Workspace
	err = db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		projectID := ""
		if rel := doc.Data.Relationships.Project; rel != nil && rel.Data != nil {
			projectID = rel.Data.ID
		} else {
			proj, err := s.Workspaces.DefaultProject(ctx, tx, p)
			if err != nil {
				return err
			}
			projectID = proj.ID
		}
		in := workspace.CreateWorkspaceInput{
			ProjectID: projectID, Name: *a.Name, CloudName: *a.Name,
			Settings: settings,
		}
		if a.ExecutionMode != nil {
			in.ExecutionMode = *a.ExecutionMode
		}
		var err error
		if w, err = s.Workspaces.CreateWorkspace(ctx, tx, p, in); err != nil {
			return err
		}
		if a.GlobalRemoteState != nil {
			if w, err = s.Workspaces.SetGlobalRemoteState(ctx, tx, p, w.ID, *a.GlobalRemoteState); err != nil {
				return err
			}
		}
		if rel := doc.Data.Relationships.Tags; rel != nil && len(rel.Data) > 0 {
			refs := make([]workspace.TagRef, len(rel.Data))
			for i, d := range rel.Data {
				refs[i] = workspace.TagRef{ID: d.ID, Name: d.Attributes.Name}
			}
			err = s.Workspaces.AddTags(ctx, tx, p, w.ID, refs)
		}
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	o.WorkspaceID = w.ID
	return s.respondWorkspace(c, http.StatusCreated, p, o, w)
}

// updateWorkspace accepts execution mode, tool version and
// global-remote-state changes. Names
// are fixed selectors here: renaming happens on /v1 and never changes the
// cloud name.
func (s *server) updateWorkspace(c *fiber.Ctx, p access.Principal, o owner) error {
	var doc workspaceDocument
	if err := decodeDocument(c, &doc); err != nil {
		return s.writeError(c, err)
	}
	a := doc.Data.Attributes
	if doc.Data.Type != "workspaces" {
		return s.writeError(c, errInvalidDocument)
	}
	if err := a.refused(); err != nil {
		return s.writeError(c, err)
	}
	if err := refuseDestroyPlan(a); err != nil {
		return s.writeError(c, err)
	}
	ctx := c.UserContext()
	var w workspace.Workspace
	err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		current, err := s.Workspaces.WorkspaceForWrite(ctx, tx, p, o.WorkspaceID, access.PermWorkspaceWrite)
		if err != nil {
			return err
		}
		if a.Name != nil && *a.Name != current.CloudName {
			return errInvalidDocument
		}
		settings, err := s.settingsFor(current.ExecutionSettings, a.TerraformVersion)
		if err != nil {
			return err
		}
		w, err = s.Workspaces.UpdateWorkspace(ctx, tx, p, current.ID, workspace.UpdateWorkspaceInput{
			Settings:      settings,
			ExecutionMode: a.ExecutionMode,
		})
		if err == nil && a.GlobalRemoteState != nil {
			w, err = s.Workspaces.SetGlobalRemoteState(ctx, tx, p, current.ID, *a.GlobalRemoteState)
		}
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	return s.respondWorkspace(c, http.StatusOK, p, o, w)
}

func (s *server) deleteWorkspace(c *fiber.Ctx, p access.Principal, o owner) error {
	return s.removeWorkspace(c, p, o, s.Workspaces.ForceDeleteWorkspace)
}

// safeDeleteWorkspace deletes a workspace only while it is unlocked and
// its current state manages no resources; otherwise 409 in HCP's words.
func (s *server) safeDeleteWorkspace(c *fiber.Ctx, p access.Principal, o owner) error {
	return s.removeWorkspace(c, p, o, s.Workspaces.SafeDeleteWorkspace)
}

// removeWorkspace deletes the workspace with del in a transaction, then
// its stored objects.
func (s *server) removeWorkspace(c *fiber.Ctx, p access.Principal, o owner,
	del func(ctx context.Context, tx *sqlx.Tx, p access.Principal, workspaceID string) (workspace.Workspace, []string, error),
) error {
	ctx := c.UserContext()
	var keys []string
	err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var err error
		_, keys, err = del(ctx, tx, p, o.WorkspaceID)
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	// References are gone; the objects follow. A failure here leaves an
	// orphan for the sweep, never a dangling reference.
	s.State.DeleteObjects(ctx, keys)
	return c.SendStatus(http.StatusNoContent)
}

// lockAction runs one of the lock actions in a transaction and answers
// with the workspace document.
func (s *server) lockAction(c *fiber.Ctx, p access.Principal, o owner,
	act func(ctx context.Context, tx *sqlx.Tx) (workspace.Workspace, error),
) error {
	ctx := c.UserContext()
	var w workspace.Workspace
	err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var err error
		w, err = act(ctx, tx)
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	return s.respondWorkspace(c, http.StatusOK, p, o, w)
}

func (s *server) lockWorkspace(c *fiber.Ctx, p access.Principal, o owner) error {
	// The body is optional ({"data":{"type":"","attributes":{"reason":…}}}).
	var doc struct {
		Data struct {
			Attributes struct {
				Reason string `json:"reason"`
			} `json:"attributes"`
		} `json:"data"`
	}
	if c.Request().Header.ContentLength() != 0 {
		if err := decodeDocument(c, &doc); err != nil {
			return s.writeError(c, err)
		}
	}
	return s.lockAction(c, p, o, func(ctx context.Context, tx *sqlx.Tx) (workspace.Workspace, error) {
		return s.Workspaces.LockWorkspace(ctx, tx, p, o.WorkspaceID, doc.Data.Attributes.Reason)
	})
}

func (s *server) unlockWorkspace(c *fiber.Ctx, p access.Principal, o owner) error {
	return s.lockAction(c, p, o, func(ctx context.Context, tx *sqlx.Tx) (workspace.Workspace, error) {
		return s.Workspaces.UnlockWorkspace(ctx, tx, p, o.WorkspaceID)
	})
}

func (s *server) forceUnlockWorkspace(c *fiber.Ctx, p access.Principal, o owner) error {
	return s.lockAction(c, p, o, func(ctx context.Context, tx *sqlx.Tx) (workspace.Workspace, error) {
		return s.Workspaces.ForceUnlockWorkspace(ctx, tx, p, o.WorkspaceID)
	})
}
