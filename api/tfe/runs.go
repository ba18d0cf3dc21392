package tfe

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/httpx"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/workspace"
)

func (s *server) registerRuns(r fiber.Router) {
	r.Post("/workspaces/:id/configuration-versions", s.guard(s.byWorkspaceID, s.createConfigurationVersion))
	r.Get("/workspaces/:id/configuration-versions", s.guard(s.byWorkspaceID, s.listConfigurationVersions))
	r.Get("/configuration-versions/:id", s.guard(s.byConfigurationVersion, s.readConfigurationVersion))
	r.Get("/configuration-versions/:id/download", s.guard(s.byConfigurationVersion, s.downloadConfiguration))
	r.Post("/configuration-versions/:id/actions/archive", s.guard(s.byConfigurationVersion, s.archiveConfiguration))
	r.Put("/configuration-versions/:id/upload", s.uploadConfiguration)
	r.Post("/runs", s.guard(s.byRunDocument, s.createRun))
	r.Get("/runs/:id", s.guard(s.byRun, s.readRun))
	r.Get("/runs/:id/run-events", s.guard(s.byRun, s.runEvents))
	r.Get("/run-events/:id", s.guard(s.byRunEvent, s.readRunEvent))
	r.Get("/runs/:id/comments", s.guard(s.byRun, s.runComments))
	r.Post("/runs/:id/comments", s.guard(s.byRun, s.commentRun))
	r.Get("/comments/:id", s.guard(s.byComment, s.readComment))
	r.Post("/runs/:id/actions/apply", s.guard(s.byRun, s.applyRun))
	r.Post("/runs/:id/actions/discard", s.guardStop(s.byRun, s.discardRun))
	r.Post("/runs/:id/actions/cancel", s.guardStop(s.byRun, s.cancelRun))
	r.Post("/runs/:id/actions/force-cancel", s.guardStop(s.byRun, s.forceCancelRun))
	// Force-execute starts a plan, so it passes admission as creating a
	// run does (guard, not guardStop).
	r.Post("/runs/:id/actions/force-execute", s.guard(s.byRun, s.forceExecuteRun))
	r.Get("/run-attempts/:id/policy-bundle", s.policyBundle)
	r.Get("/workspaces/:id/runs", s.guard(s.byWorkspaceID, s.workspaceRuns))
	r.Get("/organizations/:org/runs/queue", s.guard(s.byOrganization, s.runQueue))
	r.Get("/organizations/:org/runs", s.guard(s.byOrganization, s.organizationRuns))
	r.Get("/organizations/:org/capacity", s.guard(s.byOrganization, s.capacity))
	s.registerPhases(r)
	s.registerPolicyChecks(r)
}

func (s *server) byConfigurationVersion(ctx context.Context, c *fiber.Ctx, p access.Principal) (owner, error) {
	return s.project(ctx, p, `
		SELECT o.id, o.slug, v.workspace_id FROM configuration_versions v JOIN organizations o ON o.id = v.organization_id
		WHERE v.id = $1 AND ($2 = '' OR o.id = $2)`, c.Params("id"))
}

func (s *server) byRun(ctx context.Context, c *fiber.Ctx, p access.Principal) (owner, error) {
	return s.runOwner(ctx, p, c.Params("id"))
}

func (s *server) runOwner(ctx context.Context, p access.Principal, runID string) (owner, error) {
	return s.project(ctx, p, `
		SELECT o.id, o.slug, r.workspace_id FROM runs r JOIN organizations o ON o.id = r.organization_id
		WHERE r.id = $1 AND ($2 = '' OR o.id = $2)`, runID)
}

// runDocument is the body of POST /runs.
type runDocument struct {
	Data struct {
		Type       string `json:"type"`
		Attributes struct {
			AutoApply        *bool            `json:"auto-apply"`
			IsDestroy        *bool            `json:"is-destroy"`
			Refresh          *bool            `json:"refresh"`
			RefreshOnly      *bool            `json:"refresh-only"`
			PlanOnly         *bool            `json:"plan-only"`
			AllowEmptyApply  *bool            `json:"allow-empty-apply"`
			SavePlan         *bool            `json:"save-plan"`
			TerraformVersion *string          `json:"terraform-version"`
			Message          *string          `json:"message"`
			TargetAddrs      []string         `json:"target-addrs"`
			ReplaceAddrs     []string         `json:"replace-addrs"`
			Variables        run.RunVariables `json:"variables"`
		} `json:"attributes"`
		Relationships struct {
			Workspace struct {
				Data *ref `json:"data"`
			} `json:"workspace"`
			ConfigurationVersion struct {
				Data *ref `json:"data"`
			} `json:"configuration-version"`
		} `json:"relationships"`
	} `json:"data"`
}

const runDocumentKey = "cairn.run-document"

// byRunDocument resolves a run creation by the workspace its document
// names; the bounded document is decoded once and kept for the handler.
func (s *server) byRunDocument(ctx context.Context, c *fiber.Ctx, p access.Principal) (owner, error) {
	var doc runDocument
	if err := decodeDocument(c, &doc); err != nil {
		return owner{}, err
	}
	c.Locals(runDocumentKey, doc)
	ws := doc.Data.Relationships.Workspace.Data
	if ws == nil {
		return owner{}, errInvalidDocument
	}
	return s.project(ctx, p, `
		SELECT o.id, o.slug, w.id FROM workspaces w JOIN organizations o ON o.id = w.organization_id
		WHERE w.id = $1 AND ($2 = '' OR o.id = $2)`, ws.ID)
}

// configurationVersionResource renders a version; the upload URL, a
// capability, is given once, in the answer that created it.
func (s *server) configurationVersionResource(cv run.ConfigurationVersion, created bool) resource {
	stamps := map[string]string{"queued-at": timestamp(cv.CreatedAt)}
	if cv.UploadedAt != nil {
		stamps["finished-at"] = timestamp(*cv.UploadedAt)
	}
	if cv.ArchivedAt != nil {
		stamps["archived-at"] = timestamp(*cv.ArchivedAt)
	}
	attrs := map[string]any{
		"status": cv.Status, "speculative": cv.Speculative, "auto-queue-runs": cv.AutoQueueRuns, "provisional": cv.Provisional,
		"source": "tfe-api", "error": cv.ErrorCode, "error-message": cv.ErrorCode,
		"status-timestamps": stamps,
	}
	if created && cv.Status == run.ConfigurationPending {
		attrs["upload-url"] = s.signedURL(http.MethodPut, "/api/v2/configuration-versions/"+cv.ID+"/upload", uploadURLLifetime)
	}
	return resource{ID: cv.ID, Type: "configuration-versions", Attributes: attrs}
}

func (s *server) createConfigurationVersion(c *fiber.Ctx, p access.Principal, o owner) error {
	var doc struct {
		Data struct {
			Attributes struct {
				Speculative   bool  `json:"speculative"`
				Provisional   bool  `json:"provisional"`
				AutoQueueRuns *bool `json:"auto-queue-runs"`
			} `json:"attributes"`
		} `json:"data"`
	}
	if err := decodeDocument(c, &doc); err != nil {
		return s.writeError(c, err)
	}
	var cv run.ConfigurationVersion
	err := db.WithTx(c.UserContext(), s.DB, func(tx *sqlx.Tx) error {
		var err error
		cv, err = s.Runs.CreateConfigurationVersion(c.UserContext(), tx, p, o.WorkspaceID, run.ConfigurationInput{
			Source: run.SourceTFE, Speculative: doc.Data.Attributes.Speculative, Provisional: doc.Data.Attributes.Provisional,
		})
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusCreated, s.configurationVersionResource(cv, true))
}

func (s *server) readConfigurationVersion(c *fiber.Ctx, p access.Principal, o owner) error {
	cv, err := s.Runs.GetConfigurationVersion(c.UserContext(), p, c.Params("id"))
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusOK, s.configurationVersionResource(cv, false))
}

func (s *server) listConfigurationVersions(c *fiber.Ctx, p access.Principal, o owner) error {
	number, size := pageParams(c)
	rows, total, err := s.Runs.ListConfigurationVersions(c.UserContext(), p, o.WorkspaceID, number, size)
	if err != nil {
		return s.writeError(c, err)
	}
	data := make([]resource, len(rows))
	for i, cv := range rows {
		data[i] = s.configurationVersionResource(cv, false)
	}
	return writeDocument(c, http.StatusOK, map[string]any{"data": data, "meta": paginate(number, size, total)})
}

// downloadConfiguration streams an uploaded version's archive; it is the
// workspace's source, never cached.
func (s *server) downloadConfiguration(c *fiber.Ctx, p access.Principal, o owner) error {
	rc, cv, err := s.Runs.DownloadConfiguration(c.UserContext(), p, c.Params("id"))
	if err != nil {
		return s.writeError(c, err)
	}
	c.Set(fiber.HeaderContentType, "application/octet-stream")
	c.Set(fiber.HeaderCacheControl, "private, no-store")
	c.Status(http.StatusOK)
	size := -1
	if cv.SizeBytes != nil {
		size = int(*cv.SizeBytes)
	}
	return c.SendStream(rc, size)
}

// archiveConfiguration deletes an old version's archive; the object goes
// once the transaction committed.
func (s *server) archiveConfiguration(c *fiber.Ctx, p access.Principal, o owner) error {
	ctx := c.UserContext()
	var key string
	err := db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var err error
		_, key, err = s.Runs.ArchiveConfigurationVersion(ctx, tx, p, c.Params("id"))
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	s.Runs.DeleteArchiveObject(ctx, key)
	return c.SendStatus(http.StatusAccepted)
}

// uploadConfiguration receives an archive at its signed capability URL:
// signature, then admission for the version's exact owner, then the
// declared length, all before a byte is read.
func (s *server) uploadConfiguration(c *fiber.Ctx) error {
	ctx := c.UserContext()
	path := "/api/v2/configuration-versions/" + c.Params("id") + "/upload"
	if !s.validSignature(http.MethodPut, path, c.Query("expires"), c.Query("signature")) {
		return s.writeError(c, fault.ErrNotFound)
	}
	cv, err := s.Runs.ConfigurationOwner(ctx, c.Params("id"))
	if err != nil {
		return s.writeError(c, err)
	}
	if _, err := s.Launch.Require(ctx, nil, launch.Subject{OrganizationID: cv.OrganizationID, WorkspaceID: cv.WorkspaceID}); err != nil {
		return s.writeError(c, err)
	}
	if int64(c.Request().Header.ContentLength()) > run.MaxArchiveBytes {
		return s.writeError(c, run.ArchiveError{Code: "archive_too_large"})
	}
	var body io.Reader = c.Request().BodyStream()
	if body == nil {
		body = bytes.NewReader(c.Body())
	}
	if _, err := s.Runs.UploadConfiguration(ctx, cv.ID, body); err != nil {
		return s.writeError(c, err)
	}
	return c.SendStatus(http.StatusOK)
}

// options are the run options a run document asks for. What Cairn never
// does, applying without approval and destroying, is refused here; the
// options themselves are checked against the run's kind when it is
// created. A run without a configuration version runs the workspace's
// current one.
func (d runDocument) options() (run.RunOptions, error) {
	attrs := d.Data.Attributes
	switch {
	case attrs.AutoApply != nil && *attrs.AutoApply:
		return run.RunOptions{}, errAutoApply
	case attrs.IsDestroy != nil && *attrs.IsDestroy:
		return run.RunOptions{}, run.ErrDestroy
	}
	isTrue := func(b *bool) bool { return b != nil && *b }
	o := run.DefaultRunOptions()
	if attrs.Refresh != nil {
		o.Refresh = *attrs.Refresh
	}
	o.RefreshOnly, o.AllowEmptyApply, o.SavePlan = isTrue(attrs.RefreshOnly), isTrue(attrs.AllowEmptyApply), isTrue(attrs.SavePlan)
	o.TargetAddrs, o.ReplaceAddrs = attrs.TargetAddrs, attrs.ReplaceAddrs
	o.Variables = attrs.Variables
	return o, nil
}

func (s *server) createRun(c *fiber.Ctx, p access.Principal, o owner) error {
	doc, _ := c.Locals(runDocumentKey).(runDocument)
	opts, err := doc.options()
	if err != nil {
		return s.writeError(c, err)
	}
	attrs := doc.Data.Attributes
	ctx := c.UserContext()
	var cvID string
	if ref := doc.Data.Relationships.ConfigurationVersion.Data; ref != nil {
		cvID = ref.ID
	} else if cv, err := s.Runs.CurrentConfiguration(ctx, o.OrganizationID, o.WorkspaceID); err == nil && cv != nil {
		cvID = cv.ID
	}
	kind := run.KindPlanAndApply
	if cv, err := s.Runs.GetConfigurationVersion(ctx, p, cvID); err == nil && cv.Speculative {
		kind = run.KindSpeculative
	} else if attrs.PlanOnly != nil && *attrs.PlanOnly {
		kind = run.KindPlanOnly
	}
	message := "Triggered via the OpenTofu CLI"
	if attrs.Message != nil && *attrs.Message != "" {
		message = *attrs.Message
	}
	toolVersion := ""
	if attrs.TerraformVersion != nil {
		// An unlisted version goes on as sent, for the run's own refusal,
		// which names the attribute.
		toolVersion = *attrs.TerraformVersion
		if pinned, err := s.tools().FromProtocol(toolVersion); err == nil {
			toolVersion = pinned
		}
	}
	var r run.Run
	err = db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var err error
		r, err = s.Runs.CreateRun(ctx, tx, p, run.CreateInput{WorkspaceID: o.WorkspaceID, ConfigurationVersionID: cvID,
			Kind: kind, Message: message, Source: run.SourceTFE, LatestConfiguration: cvID == "", Options: &opts,
			ToolVersion: toolVersion})
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	res := s.runResource(r, p, []ref{})
	if err := s.withEvents(ctx, r, &res); err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusCreated, res)
}

// tfeStatus maps a run status to the protocol's vocabulary. A run waiting
// for approval is "planned"; outcomes the protocol has no word for are
// errored (recovery) or discarded (rejection, expiry).
func tfeStatus(st run.Status) string {
	switch st {
	case run.StatusAwaitingApproval:
		return "planned"
	case run.StatusRecoveryRequired, run.StatusRecovered, run.StatusCredentialsRequired:
		return "errored"
	case run.StatusRejected, run.StatusExpired:
		return "discarded"
	}
	return string(st)
}

// runStatus is the protocol status of a run: a run whose soft policy
// failures are not (or no longer) overridden waits in policy_override; a
// saved plan that waits for its apply is planned_and_saved.
func runStatus(r run.Run, now time.Time) string {
	if r.Status == run.StatusAwaitingApproval && !r.GateOpen(now) && r.PolicyOutcome != nil && *r.PolicyOutcome == run.PolicySoftFailed {
		return "policy_override"
	}
	return protocolStatus(r, r.Status)
}

// protocolStatus is how the protocol names status st of run r, which a
// saved plan waiting for its apply calls planned_and_saved.
func protocolStatus(r run.Run, st run.Status) string {
	if st == run.StatusAwaitingApproval && r.SavePlan {
		return statusPlannedAndSaved
	}
	return tfeStatus(st)
}

// statusPlannedAndSaved is a saved plan's status between its plan and its
// apply.
const statusPlannedAndSaved = "planned_and_saved"

// runVariables renders a run's variables (as the protocol sends them: each
// value an HCL expression), null when it has none (as HCP Terraform does).
func runVariables(r run.Run) run.RunVariables {
	if len(r.Variables) == 0 {
		return nil
	}
	return r.Variables
}

// addrsOrNull renders an address list, null when empty.
func addrsOrNull(addrs []string) []string {
	if len(addrs) == 0 {
		return nil
	}
	return addrs
}

func (s *server) runResource(r run.Run, p access.Principal, checks []ref) resource {
	now := time.Now()
	// The protocol has no force-execute action flag (only the permission
	// below), so what stands ahead in the queue is not read here.
	actions := run.AvailableActions(r, nil, p, now)
	has := func(a string) bool { return slices.Contains(actions, a) }
	timestamps := map[string]string{}
	for k, v := range r.StatusTimestamps {
		timestamps[stampKey(protocolStatus(r, run.Status(k)))] = timestamp(v)
	}
	// A run may be queued for planning from its creation on.
	if t, ok := r.StatusTimestamps[string(run.StatusPending)]; ok {
		timestamps["plan-queueable-at"] = timestamp(t)
	}
	if r.ForceCanceledAt != nil {
		timestamps["force-canceled-at"] = timestamp(*r.ForceCanceledAt)
	}
	hasChanges := r.HasChanges != nil && *r.HasChanges
	perms := p.PermissionsIn(r.WorkspaceID, r.ProjectID)
	canCancel := perms.Has(access.PermRunCancel)
	attrs := map[string]any{
		"status": runStatus(r, now), "has-changes": hasChanges, "created-at": timestamp(r.CreatedAt),
		"message": r.Message, "source": "tfe-api", "auto-apply": false, "is-destroy": false, "refresh": r.Refresh,
		"refresh-only": r.RefreshOnly, "plan-only": r.Kind != run.KindPlanAndApply, "position-in-queue": 0,
		"allow-empty-apply": r.AllowEmptyApply, "save-plan": r.SavePlan, "terraform-version": workspace.ToProtocol(r.ToolVersion),
		"target-addrs": addrsOrNull(r.TargetAddrs), "replace-addrs": addrsOrNull(r.ReplaceAddrs), "variables": runVariables(r),
		"status-timestamps": timestamps,
		"actions": map[string]bool{
			// A plan waiting for approval is discarded, not canceled.
			"is-cancelable":       has(run.ActionCancel) && r.Status != run.StatusAwaitingApproval && r.Status != run.StatusPolicyOverride,
			"is-confirmable":      has(run.ActionApprove),
			"is-discardable":      has(run.ActionReject),
			"is-force-cancelable": canCancel && r.ForceCancelable(now),
		},
		"permissions": map[string]bool{
			"can-apply": perms.Has(access.PermRunApprove), "can-cancel": canCancel,
			"can-discard": perms.Has(access.PermRunApprove), "can-force-cancel": canCancel,
			"can-force-execute": run.ForceExecutePermitted(p, r),
		},
	}
	if t, ok := r.StatusTimestamps[string(run.StatusCanceled)]; ok {
		attrs["canceled-at"] = timestamp(t)
	}
	if at := r.ForceCancelAvailableAt(); at != nil {
		attrs["force-cancel-available-at"] = timestamp(*at)
	}
	return resource{
		ID: r.ID, Type: "runs", Attributes: attrs,
		Relationships: map[string]relationship{
			"plan":                  toOne(phaseID("plan_", r.ID), "plans"),
			"apply":                 toOne(phaseID("apply_", r.ID), "applies"),
			"workspace":             toOne(r.WorkspaceID, "workspaces"),
			"configuration-version": toOne(r.ConfigurationVersionID, "configuration-versions"),
			"created-by":            toOne(r.CreatedByID, "users"),
			"cost-estimate":         {Data: nil},
			"policy-checks":         {Data: checks},
			"task-stages":           {Data: []ref{}},
			"run-events":            {Data: []ref{}},
			"comments":              {Data: []ref{}},
			"confirmed-by":          confirmedBy(r),
		},
	}
}

// confirmedBy names who approved the run, once someone has.
func confirmedBy(r run.Run) relationship {
	if r.DecisionAction == nil || *r.DecisionAction != run.DecisionApproved || r.DecisionActorID == nil {
		return relationship{Data: nil}
	}
	return toOne(*r.DecisionActorID, "users")
}

func (s *server) readRun(c *fiber.Ctx, p access.Principal, o owner) error {
	r, err := s.Runs.GetRun(c.UserContext(), p, c.Params("id"))
	if err != nil {
		return s.writeError(c, err)
	}
	checks, err := s.policyCheckRefs(c.UserContext(), r)
	if err != nil {
		return s.writeError(c, err)
	}
	res := s.runResource(r, p, checks)
	if err := s.withEvents(c.UserContext(), r, &res); err != nil {
		return s.writeError(c, err)
	}
	doc := map[string]any{"data": res}
	included, err := s.runIncludes(c, p, o, r)
	if err != nil {
		return s.writeError(c, err)
	}
	if len(included) > 0 {
		doc["included"] = included
	}
	return writeDocument(c, http.StatusOK, doc)
}

// runIncludes are the related resources a run read asked for
// (include=created_by,workspace,plan,apply,configuration_version); other
// include values are ignored rather than refused.
func (s *server) runIncludes(c *fiber.Ctx, p access.Principal, o owner, r run.Run) ([]resource, error) {
	ctx := c.UserContext()
	var out []resource
	if includes(c, "created_by") {
		out = append(out, s.userResource(ctx, r.CreatedByKind, r.CreatedByID))
	}
	if includes(c, "workspace") {
		w, err := s.Workspaces.GetWorkspace(ctx, p, r.WorkspaceID)
		if err != nil {
			return nil, err
		}
		res, err := s.workspaceResource(ctx, p, o, w)
		if err != nil {
			return nil, err
		}
		out = append(out, res)
	}
	if includes(c, "plan") {
		out = append(out, s.phaseResource(r, run.PhasePlan))
	}
	if includes(c, "apply") {
		out = append(out, s.phaseResource(r, run.PhaseApply))
	}
	if includes(c, "configuration_version") {
		cv, err := s.Runs.GetConfigurationVersion(ctx, p, r.ConfigurationVersionID)
		if err != nil {
			return nil, err
		}
		out = append(out, s.configurationVersionResource(cv, false))
	}
	return out, nil
}

// withEvents names a single run's history in its run-events relationship;
// r is the run res renders, already read for the principal.
func (s *server) withEvents(ctx context.Context, r run.Run, res *resource) error {
	events, err := s.Runs.EventsOf(ctx, r)
	if err != nil {
		return err
	}
	refs := make([]ref, len(events))
	for i, e := range events {
		refs[i] = ref{ID: e.ID, Type: "run-events"}
	}
	res.Relationships["run-events"] = relationship{Data: refs}
	comments := []ref{}
	for _, e := range events {
		if e.Action == run.EventCommented && e.CommentID != nil {
			comments = append(comments, ref{ID: *e.CommentID, Type: "comments"})
		}
	}
	res.Relationships["comments"] = relationship{Data: comments}
	return nil
}

// stampKey is a status timestamp's key as clients read it: the
// protocol's status, hyphenated, with -at.
func stampKey(status string) string { return strings.ReplaceAll(status, "_", "-") + "-at" }

// runAction runs one decision on the run's current review in a transaction
// and answers 202 as the protocol does. The decision's optional comment
// ({"comment": "..."}, as go-tfe sends it) is added in the same
// transaction.
func (s *server) runAction(c *fiber.Ctx, p access.Principal, act func(tx *sqlx.Tx, r run.Run, comment string) (run.Run, error)) error {
	ctx := c.UserContext()
	var opts struct {
		Comment *string `json:"comment"`
	}
	body, err := httpx.ReadBody(c, documentLimit)
	if err != nil {
		return s.writeError(c, err)
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := decodeBody(body, &opts); err != nil {
			return s.writeError(c, err)
		}
	}
	r, err := s.Runs.GetRun(ctx, p, c.Params("id"))
	if err != nil {
		return s.writeError(c, err)
	}
	err = db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		comment := ""
		if opts.Comment != nil {
			comment = *opts.Comment
		}
		decided, err := act(tx, r, comment)
		if err != nil || opts.Comment == nil || strings.TrimSpace(*opts.Comment) == "" {
			return err
		}
		_, err = s.Runs.CommentDecision(ctx, tx, p, decided, *opts.Comment)
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	return c.SendStatus(http.StatusAccepted)
}

// applyRun is the CLI's "yes": an approval bound to the review the run has
// now, exactly what the prompt showed.
func (s *server) applyRun(c *fiber.Ctx, p access.Principal, o owner) error {
	return s.runAction(c, p, func(tx *sqlx.Tx, r run.Run, _ string) (run.Run, error) {
		return s.Runs.Approve(c.UserContext(), tx, p, r.ID, run.BindingOf(r))
	})
}

// discardRun takes the optional comment go-tfe sends as the discard
// reason.
func (s *server) discardRun(c *fiber.Ctx, p access.Principal, o owner) error {
	return s.runAction(c, p, func(tx *sqlx.Tx, r run.Run, comment string) (run.Run, error) {
		// go-tfe's discard comment is also the discard reason the run shows.
		return s.Runs.Reject(c.UserContext(), tx, p, r.ID, run.BindingOf(r), comment)
	})
}

func (s *server) cancelRun(c *fiber.Ctx, p access.Principal, o owner) error {
	return s.runAction(c, p, func(tx *sqlx.Tx, r run.Run, _ string) (run.Run, error) {
		return s.Runs.Cancel(c.UserContext(), tx, p, r.ID)
	})
}

// forceCancelRun kills a run's sandbox without the interrupt grace once a
// cancel has not taken effect within the cool-off
// (force-cancel-available-at); before that, or without a cancel, it is
// not allowed.
func (s *server) forceCancelRun(c *fiber.Ctx, p access.Principal, o owner) error {
	return s.runAction(c, p, func(tx *sqlx.Tx, r run.Run, _ string) (run.Run, error) {
		return s.Runs.ForceCancel(c.UserContext(), tx, p, r.ID)
	})
}

// forceExecuteRun starts a pending run at once, discarding every run
// ahead of it in the workspace's queue; a run ahead that is planning or
// applying refuses it with 409.
func (s *server) forceExecuteRun(c *fiber.Ctx, p access.Principal, o owner) error {
	return s.runAction(c, p, func(tx *sqlx.Tx, r run.Run, _ string) (run.Run, error) {
		return s.Runs.ForceExecute(c.UserContext(), tx, p, r.ID)
	})
}

func (s *server) workspaceRuns(c *fiber.Ctx, p access.Principal, o owner) error {
	f := runFilter(c)
	f.WorkspaceID = o.WorkspaceID
	return s.listRuns(c, p, o, f)
}

// runQueue lists the organization's runs that are waiting or in progress.
func (s *server) runQueue(c *fiber.Ctx, p access.Principal, o owner) error {
	return s.listRuns(c, p, o, run.RunFilter{Statuses: []string{string(run.StatusPending), string(run.StatusPlanQueued),
		string(run.StatusPlanning), string(run.StatusApplyQueued), string(run.StatusApplying)}})
}

// organizationRuns lists the organization's runs, newest first, with the
// filters go-tfe's ListForOrganization sends (see runFilter), and
// filter[workspace_names].
func (s *server) organizationRuns(c *fiber.Ctx, p access.Principal, o owner) error {
	f := runFilter(c)
	f.WorkspaceNames = queryList(c, "filter[workspace_names]")
	return s.listRuns(c, p, o, f)
}

// runFilter reads the run-list filters both run lists take, each a
// comma-separated list: filter[status] (protocol statuses),
// filter[operation] and filter[source]; search[commit] matches nothing,
// as no run has a commit. Filters on what Cairn does not model (agent
// pools, users, timeframes) are ignored rather than refused.
func runFilter(c *fiber.Ctx) run.RunFilter {
	var f run.RunFilter
	if statuses := queryList(c, "filter[status]"); len(statuses) > 0 {
		f.Statuses, f.SavedPlans = statusFilter(statuses)
		f.Nothing = len(f.Statuses) == 0
	}
	if ops := queryList(c, "filter[operation]"); len(ops) > 0 {
		for _, op := range ops {
			f.Kinds = append(f.Kinds, operationKinds[op]...)
		}
		f.Nothing = f.Nothing || len(f.Kinds) == 0
	}
	if sources := queryList(c, "filter[source]"); len(sources) > 0 && !slices.Contains(sources, runSource) {
		f.Nothing = true
	}
	if c.Query("search[commit]") != "" {
		f.Nothing = true
	}
	return f
}

// runSource is the source every run shows: runs come through the API.
const runSource = "tfe-api"

// operationKinds maps a protocol run operation to the run kinds that are
// it; destroy, which Cairn does not offer, has none, and the list filter
// does not tell refresh-only, saved-plan and empty-apply runs apart.
var operationKinds = map[string][]string{
	"plan_and_apply": {string(run.KindPlanAndApply)},
	"plan_only":      {string(run.KindPlanOnly), string(run.KindSpeculative)},
}

// statusFilter is the run filter of protocol statuses: the internal
// statuses they are shown for, and which of the runs awaiting approval
// they mean, since a saved plan awaiting its apply is shown as
// planned_and_saved and any other as planned.
func statusFilter(protocol []string) ([]string, run.SavedPlanFilter) {
	var internal []string
	for _, st := range protocol {
		internal = append(internal, internalStatuses(st)...)
	}
	planned, saved := slices.Contains(protocol, "planned"), slices.Contains(protocol, statusPlannedAndSaved)
	switch {
	case saved && !planned:
		return internal, run.SavedPlansOnly
	case planned && !saved:
		return internal, run.SavedPlansExcluded
	}
	return internal, run.SavedPlansAny
}

// internalStatuses are the run statuses shown as a protocol status (the
// inverse of tfeStatus); an unknown name has none.
func internalStatuses(protocol string) []string {
	switch protocol {
	case "planned", statusPlannedAndSaved:
		return []string{string(run.StatusAwaitingApproval)}
	case "errored":
		return []string{string(run.StatusErrored), string(run.StatusRecoveryRequired), string(run.StatusRecovered),
			string(run.StatusCredentialsRequired)}
	case "discarded":
		return []string{string(run.StatusRejected), string(run.StatusExpired)}
	}
	for _, st := range []run.Status{run.StatusPending, run.StatusPlanQueued, run.StatusPlanning, run.StatusPolicyOverride,
		run.StatusApplyQueued, run.StatusApplying, run.StatusApplied, run.StatusPlannedAndFinished, run.StatusCanceled,
		run.StatusPolicySoftFailed} {
		if string(st) == protocol {
			return []string{protocol}
		}
	}
	return nil
}

// maxQueryList bounds a comma-separated filter: more values than this are
// not looked at.
const maxQueryList = 50

// queryList is a comma-separated query parameter's non-empty values.
func queryList(c *fiber.Ctx, name string) []string {
	var out []string
	for _, v := range strings.Split(c.Query(name), ",") {
		if v = strings.TrimSpace(v); v != "" && len(out) < maxQueryList {
			out = append(out, v)
		}
	}
	return out
}

func (s *server) listRuns(c *fiber.Ctx, p access.Principal, o owner, f run.RunFilter) error {
	number, size := pageParams(c)
	rows, total, err := s.Runs.ListRunsPage(c.UserContext(), p, f, number, size)
	if err != nil {
		return s.writeError(c, err)
	}
	data := make([]resource, len(rows))
	for i, r := range rows {
		data[i] = s.runResource(r, p, []ref{})
	}
	doc := map[string]any{"data": data, "meta": paginate(number, size, total)}
	// include=workspace adds each listed run's workspace once.
	if includes(c, "workspace") {
		included := []resource{}
		seen := map[string]bool{}
		for _, r := range rows {
			if seen[r.WorkspaceID] {
				continue
			}
			seen[r.WorkspaceID] = true
			w, err := s.Workspaces.GetWorkspace(c.UserContext(), p, r.WorkspaceID)
			if err != nil {
				return s.writeError(c, err)
			}
			res, err := s.workspaceResource(c.UserContext(), p, o, w)
			if err != nil {
				return s.writeError(c, err)
			}
			included = append(included, res)
		}
		doc["included"] = included
	}
	return writeDocument(c, http.StatusOK, doc)
}

func (s *server) capacity(c *fiber.Ctx, p access.Principal, o owner) error {
	if err := p.Require(access.PermRunRead); err != nil {
		return s.writeError(c, err)
	}
	pending, running, err := s.Runs.Capacity(c.UserContext(), o.OrganizationID)
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusOK, resource{ID: o.OrganizationSlug, Type: "organization-capacity",
		Attributes: map[string]int{"pending": pending, "running": running}})
}
