package tfe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/httpx"
	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/api/policy/rego"
	"github.com/cairnhq/cairn/api/run"
)

// maxPolicyOutputBytes bounds the text a policy check's output renders.
const maxPolicyOutputBytes = 1 << 20

func (s *server) registerPolicyChecks(r fiber.Router) {
	r.Get("/policy-checks/:id", s.guard(s.byPolicyCheck, s.readPolicyCheck))
	r.Get("/policy-checks/:id/output", s.guard(s.byPolicyCheck, s.policyCheckOutput))
	r.Post("/policy-checks/:id/actions/override", s.guard(s.byPolicyCheck, s.overridePolicyCheck))
}

func (s *server) byPolicyCheck(ctx context.Context, c *fiber.Ctx, p access.Principal) (owner, error) {
	return s.project(ctx, p, `
		SELECT o.id, o.slug, r.workspace_id FROM policy_checks k JOIN runs r ON r.id = k.run_id
		JOIN organizations o ON o.id = k.organization_id
		WHERE k.id = $1 AND ($2 = '' OR o.id = $2)`, c.Params("id"))
}

// policyCheckRefs lists a run's policy check for the run document. A run
// without attachments has none, as with the protocol's own service, so the
// CLI prints no empty policy section.
func (s *server) policyCheckRefs(ctx context.Context, r run.Run) ([]ref, error) {
	c, _, err := policy.CheckOfRun(ctx, s.DB, r.ID)
	if errors.Is(err, fault.ErrNotFound) {
		return []ref{}, nil
	}
	if err != nil {
		return nil, err
	}
	if c.Attachments == 0 && c.ConfigurationError == nil {
		return []ref{}, nil
	}
	return []ref{{ID: c.ID, Type: "policy-checks"}}, nil
}

// protocolPlanStatus is a run's plan status as the remote backend reports
// it. The CLI reads the run once the plan is finished, then waits for the
// policy checks the run lists or, with none listed, asks whether the run
// can be confirmed: a plan whose run is still in its policy stage is
// reported running, so its log stays open for the stage's lines and the
// CLI never finds a run that has not decided yet.
func protocolPlanStatus(r run.Run) string {
	if r.PlanStatus == run.PhaseFinished && r.Status == run.StatusPlanning {
		return run.PhaseRunning
	}
	return r.PlanStatus
}

func (s *server) policyReview(c *fiber.Ctx, p access.Principal) (run.PolicyReview, error) {
	review, err := s.Runs.PolicyByCheck(c.UserContext(), p, c.Params("id"))
	if err != nil {
		return run.PolicyReview{}, err
	}
	if review.Check == nil {
		return run.PolicyReview{}, fault.ErrNotFound
	}
	return review, nil
}

// policyScope reports organization when every result came from an
// organization attachment, and workspace otherwise (SPEC §4). A running
// check has no results yet: its snapshotted attachments, which the
// results will follow one for one, decide.
func policyScope(review run.PolicyReview) string {
	scopes := make([]string, 0, len(review.Results)+len(review.Snapshot))
	for _, r := range review.Results {
		scopes = append(scopes, r.Scope)
	}
	for _, e := range review.Snapshot {
		scopes = append(scopes, e.Scope)
	}
	if len(scopes) == 0 {
		return "workspace"
	}
	for _, scope := range scopes {
		if scope != policy.ScopeOrganization {
			return "workspace"
		}
	}
	return "organization"
}

// policyStamps are a check's status timestamps: queued when the plan
// commit reserved it, then when its status was reached.
func policyStamps(review run.PolicyReview, status string) map[string]string {
	c := review.Check
	stamps := map[string]string{"queued-at": timestamp(c.ReservedAt)}
	switch {
	case c.EvaluatedAt != nil:
		stamps[strings.ReplaceAll(status, "_", "-")+"-at"] = timestamp(*c.EvaluatedAt)
	case review.Incomplete():
		if ended, ok := review.Run.StatusTimestamps[string(review.Run.Status)]; ok {
			stamps["errored-at"] = timestamp(ended)
		}
	}
	return stamps
}

func (s *server) policyCheckResource(review run.PolicyReview, p access.Principal) resource {
	now := time.Now()
	c := review.Check
	status := review.Status()
	counts := map[string]int{"passed": 0, "advisory-failed": 0, "soft-failed": 0, "hard-failed": 0}
	for _, r := range review.Results {
		switch {
		case r.Status == policy.ResultPassed:
			counts["passed"]++
		case r.Status == policy.ResultError || r.EnforcementMode == policy.ModeHardMandatory:
			counts["hard-failed"]++
		case r.EnforcementMode == policy.ModeSoftMandatory:
			counts["soft-failed"]++
		default:
			counts["advisory-failed"]++
		}
	}
	overridable := review.Run.Overridable(now)
	return resource{
		ID: c.ID, Type: "policy-checks",
		Attributes: map[string]any{
			"status": status, "scope": policyScope(review),
			"result": map[string]any{
				"passed": counts["passed"], "advisory-failed": counts["advisory-failed"], "soft-failed": counts["soft-failed"],
				"hard-failed": counts["hard-failed"], "total-failed": len(review.Results) - counts["passed"],
				"result": c.Completed() && policy.GateOpensOnItsOwn(c.Outcome), "duration": c.DurationMS, "sentinel": nil,
			},
			"actions":           map[string]bool{"is-overridable": overridable},
			"permissions":       map[string]bool{"can-override": p.Require(access.PermPolicyOverrideSoft) == nil},
			"status-timestamps": policyStamps(review, status),
		},
		Relationships: map[string]relationship{"run": toOne(c.RunID, "runs")},
	}
}

func (s *server) readPolicyCheck(c *fiber.Ctx, p access.Principal, o owner) error {
	review, err := s.policyReview(c, p)
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusOK, s.policyCheckResource(review, p))
}

// policyCheckOutput renders the sanitized findings as text the CLI prints
// line by line: no details, bounded in size.
func (s *server) policyCheckOutput(c *fiber.Ctx, p access.Principal, o owner) error {
	review, err := s.policyReview(c, p)
	if err != nil {
		return s.writeError(c, err)
	}
	c.Set(fiber.HeaderContentType, "text/plain; charset=utf-8")
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Status(http.StatusOK)
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		out := &boundedWriter{w: w, left: maxPolicyOutputBytes}
		writePolicyText(out, review)
		if out.truncated {
			fmt.Fprintln(w, "\n[output truncated; the full sanitized evidence is at GET /v1/runs/"+review.Run.ID+"/policy]")
		}
		_ = w.Flush()
	})
	return nil
}

func writePolicyText(w *boundedWriter, review run.PolicyReview) {
	c := review.Check
	status := review.Status()
	attachments := len(review.Results)
	if !c.Completed() {
		attachments = len(review.Snapshot)
	}
	w.line(fmt.Sprintf("Cairn policy check %s: %s (%d attachment(s), engine OPA %s)", c.ID, status, attachments, rego.EngineVersion))
	switch {
	case review.Incomplete():
		w.line("  " + run.PolicyIncomplete)
		return
	case !c.Completed():
		w.line("  The evaluation has not completed yet.")
		return
	}
	if c.ConfigurationError != nil {
		w.line("  The attachment list could not be evaluated: " + *c.ConfigurationError + ". Apply is blocked.")
	}
	for _, r := range review.Results {
		name := review.Names[r.PolicyVersionID]
		head := fmt.Sprintf("\n%s v%d (%s, %s): %s", name.SetName, name.Number, r.Scope, r.EnforcementMode, r.Status)
		if r.ErrorCode != nil {
			head += " — " + *r.ErrorCode
		}
		w.line(head)
		for _, f := range policy.PublicFindings(r.Findings) {
			line := "  - " + f.Title
			if f.ResourceAddress != "" {
				line += " — " + f.ResourceAddress
			}
			w.line(line)
			if f.Message != "" {
				w.line("    " + strings.ReplaceAll(f.Message, "\n", "\n    "))
			}
		}
	}
	if c.Outcome == policy.OutcomeSoftFailed && !review.Overridden {
		w.line("\nSoft-mandatory policies failed. A holder of policy:override_soft can override them for this plan.")
	}
}

// boundedWriter stops writing once its budget is spent.
type boundedWriter struct {
	w         *bufio.Writer
	left      int
	truncated bool
}

func (b *boundedWriter) line(s string) {
	if b.truncated {
		return
	}
	if len(s)+1 > b.left {
		b.truncated = true
		return
	}
	b.left -= len(s) + 1
	_, _ = b.w.WriteString(s + "\n")
}

// overridePolicyCheck is the CLI's "override": it derives every current
// soft failure, waives each with the fixed justification for 15 minutes,
// and answers with the check.
func (s *server) overridePolicyCheck(c *fiber.Ctx, p access.Principal, o owner) error {
	ctx := c.UserContext()
	review, err := s.policyReview(c, p)
	if err != nil {
		return s.writeError(c, err)
	}
	err = db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		_, err := s.Runs.OverrideAllSoftFailures(ctx, tx, p, review.Run.ID, httpx.RequestID(c))
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	if review, err = s.policyReview(c, p); err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusOK, s.policyCheckResource(review, p))
}

// policyBundle serves a snapshotted policy bundle to a sandboxed
// evaluation at its grant (SPEC §4): the grant, then the attempt and its
// snapshot, then admission for the run's exact owner, all before a byte is
// read. Every refusal is the same 404. The bundle streams with its exact
// length and is cut short, never completed, if its bytes do not hash to
// the snapshot; a committed bundle whose recorded digest is not the
// snapshot's is a 409 (final), storage trouble a 503 (retry).
func (s *server) policyBundle(c *fiber.Ctx) error {
	ctx := c.UserContext()
	r, entry, err := s.Runs.PolicyBundleGrant(ctx, policy.BundleGrant{AttemptID: c.Params("id"), Evaluation: c.Query("evaluation"),
		Expires: c.Query("expires"), Signature: c.Query("signature")})
	if err != nil {
		return s.writeError(c, err)
	}
	if _, err := s.Launch.Require(ctx, nil, launch.Subject{OrganizationID: r.OrganizationID, WorkspaceID: r.WorkspaceID}); err != nil {
		return s.writeError(c, err)
	}
	rc, size, err := s.Runs.OpenPolicyBundle(ctx, r, entry)
	if err != nil {
		return s.writeError(c, err)
	}
	c.Set(fiber.HeaderContentType, "application/gzip")
	c.Set(fiber.HeaderCacheControl, "private, no-store")
	return c.Status(http.StatusOK).SendStream(rc, int(size))
}
