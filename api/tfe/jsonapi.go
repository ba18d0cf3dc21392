package tfe

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/httpx"
	"github.com/cairnhq/cairn/api/platform/jsondoc"
	"github.com/cairnhq/cairn/api/problem"
	"github.com/cairnhq/cairn/api/registry"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/state"
	"github.com/cairnhq/cairn/api/team"
	"github.com/cairnhq/cairn/api/trigger"
	"github.com/cairnhq/cairn/api/varset"
	"github.com/cairnhq/cairn/api/workspace"
)

// MediaType is the JSON:API media type of the remote-backend protocol.
const MediaType = "application/vnd.api+json"

// ref is a resource identifier in a relationship.
type ref struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

// relationship holds one identifier, a list of them, or null.
type relationship struct {
	Data any `json:"data"`
}

func toOne(id, typ string) relationship {
	if id == "" {
		return relationship{Data: nil}
	}
	return relationship{Data: ref{ID: id, Type: typ}}
}

// resource is one JSON:API resource object.
type resource struct {
	ID            string                  `json:"id"`
	Type          string                  `json:"type"`
	Attributes    any                     `json:"attributes"`
	Relationships map[string]relationship `json:"relationships,omitempty"`
	Links         map[string]string       `json:"links,omitempty"`
}

// pagination is the page metadata of list documents.
type pagination struct {
	CurrentPage int  `json:"current-page"`
	PrevPage    *int `json:"prev-page"`
	NextPage    *int `json:"next-page"`
	TotalPages  int  `json:"total-pages"`
	TotalCount  int  `json:"total-count"`
}

func paginate(number, size, total int) map[string]any {
	pages := (total + size - 1) / size
	p := pagination{CurrentPage: number, TotalPages: max(pages, 1), TotalCount: total}
	if number > 1 {
		prev := number - 1
		p.PrevPage = &prev
	}
	if number < pages {
		next := number + 1
		p.NextPage = &next
	}
	return map[string]any{"pagination": p}
}

// timestamp renders a time the way go-tfe's decoder requires: UTC with a
// literal Z.
func timestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// decodeBody decodes a JSON:API request document: exactly one JSON value,
// with no NUL character in any string. Unknown attributes are ignored:
// clients send attributes Cairn does not implement.
func decodeBody(body []byte, v any) error {
	if len(body) == 0 || jsondoc.Decode(body, v) != nil {
		return errInvalidDocument
	}
	return nil
}

func writeDocument(c *fiber.Ctx, status int, doc any) error {
	body, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, MediaType)
	return c.Status(status).Send(body)
}

func writeData(c *fiber.Ctx, status int, data any) error {
	return writeDocument(c, status, map[string]any{"data": data})
}

// apiError is one JSON:API error object; status is a string as the format
// (and go-tfe's decoder) requires.
type apiError struct {
	Status string            `json:"status"`
	Title  string            `json:"title"`
	Detail string            `json:"detail,omitempty"`
	Code   string            `json:"code,omitempty"`
	Source *errorSource      `json:"source,omitempty"`
	Meta   map[string]string `json:"meta"`
}

// errorSource points at the attribute an error is about.
type errorSource struct {
	Pointer string `json:"pointer"`
}

// runOptionAttributes are the protocol names of the run options.
var runOptionAttributes = map[string]string{
	"target_addrs": "target-addrs", "replace_addrs": "replace-addrs", "refresh": "refresh", "refresh_only": "refresh-only",
	"allow_empty_apply": "allow-empty-apply", "save_plan": "save-plan", "variables": "variables", "tool_version": "terraform-version",
}

// details are the fixed sentences shown to CLI users for errors they can
// act on; other errors show only the status title, never internals.
var details = []struct {
	err    error
	detail string
}{
	{workspace.ErrLocked, "The workspace is already locked."},
	{workspace.ErrNotLocked, "The workspace is not locked."},
	{workspace.ErrLockedCannotDelete, "Workspace is currently locked. Workspace must be unlocked before it can be safely deleted."},
	{workspace.ErrManagingResources, "The workspace cannot be safely deleted because it is still managing resources."},
	{workspace.ErrForceDeleteOwnersOnly, "The workspace is still managing resources, and only organization owners may delete it in this organization. Destroy its resources and safe-delete it, or have an owner enable allow-force-delete-workspaces."},
	{run.ErrConfigurationCurrent, "transition not allowed: configuration could not be archived because it is current"},
	{run.ErrConfigurationNotArchivable, "transition not allowed: only an uploaded configuration version that no unfinished run uses can be archived"},
	{workspace.ErrLockedByRun, "Unable to unlock the workspace: it is locked by Run, which releases it when it ends. Use force-unlock to take it anyway."},
	{workspace.ErrLockedByTeam, "Unable to unlock the workspace: it is locked by Team holding a team token. Use force-unlock to take it anyway."},
	{workspace.ErrLockedByOther, "Unable to unlock the workspace: it is locked by User holding another credential. Use force-unlock if the holder is gone."},
	{state.ErrNotLockedByWriter, "The workspace must be locked by the credential writing state."},
	{state.ErrConflict, "The state version does not follow the current state: its serial must be greater than the current serial and its lineage must match, unless forced."},
	{state.ErrChecksumMismatch, "The uploaded state does not match the declared md5."},
	{state.ErrTooLarge, "The state is larger than 100,000,000 bytes."},
	{state.ErrWriterRevoked, "The run writing this state can no longer write state: it was canceled or has ended."},
	{errTriggerFilter, "filter[run-trigger][type] is required and must be inbound or outbound."},
	{errNotRun, "Cairn runs no health assessments and no scheduled destroy runs: leave assessments-enabled false and auto-destroy unset."},
	{errInvalidDocument, "The request is not a valid JSON:API document for this operation."},
	{errAutoApply, "Cairn never applies without a human approval. Run the command again without -auto-approve and answer yes at the prompt, or approve the run in the dashboard (see docs/using/cli.md#local-or-remote-execution)."},
	{run.ErrDestroy, "Cairn does not run destroy plans."},
	{errDestroyPlan, "Cairn never runs destroy plans: set allow-destroy-plan (the tfe provider's allow_destroy_plan) to false."},
	{run.ErrStaleBinding, "The run's plan, policy result or state changed since it was shown; review the run again."},
	{run.ErrActionNotAllowed, "The run is not in a state where this action applies."},
	{run.ErrQueueNotDiscardable, "A run ahead of this one in the workspace's queue is queued, running, approved or in recovery and cannot be discarded; wait for it or cancel it."},
	{errInvalidInclude, "Invalid include parameter."},
	{team.ErrNameTaken, "Name has already been taken."},
	{workspace.ErrProjectNameTaken, "Name has already been taken."},
	{workspace.ErrProjectNotEmpty, "The project still holds workspaces; move or delete them first."},
	{errProjectName, "Name may only contain letters, numbers, spaces, `-`, and `_`."},
	{team.ErrGrantExists, "Team has already been taken: the team already has access here."},
	{team.ErrOwnersTeam, "The owners team cannot be deleted, renamed or given other organization access."},
	{team.ErrOwnersTeamEmpty, "The owners team must keep at least one member."},
	{errRegistryName, "registry-name must be private or public."},
	{errNamespace, "A private module's namespace is its organization's name and is not given; a public module needs one."},
	{errNoCode, "No-code provisioning is not offered."},
	{errVersionBody, "Give exactly one of deprecation (deprecated-status Deprecated or Undeprecated) and revocation (status Revoked or Unrevoked)."},
	{registry.ErrModuleExists, "A module with this name and provider already exists."},
	{registry.ErrVersionExists, "Version has already been taken."},
	{registry.ErrVersionNotPending, "The module version already has its archive: a published version never changes."},
	{registry.ErrNotDeprecated, "Only a deprecated module version can be revoked."},
	{registry.ErrRevoked, "The module version is revoked: revert the revocation first."},
	{registry.ErrNotRevoked, "The module version is not revoked."},
	{registry.ErrNotPublished, "Only a published module version can be deprecated or revoked."},
	{varset.ErrNameTaken, "Name has already been taken."},
	{varset.ErrKeyTaken, "Key has already been taken for this category in the variable set."},
	{varset.ErrValueRequired, "A sensitive variable cannot become non-sensitive, or HCL, without its value being sent again."},
	{workspace.ErrInvalidHCL, "The value is not a valid HCL expression."},
	{workspace.ErrToolVersionUnlisted, "terraform-version: Cairn runs only the OpenTofu versions its operator lists in CAIRN_TOOL_VERSIONS and the Terraform versions listed in CAIRN_TERRAFORM_VERSIONS. Pick one of GET /v1/tool-versions, or have the operator add the version (see docs/using/cli.md#tool-versions)."},
	{workspace.ErrVariableKeyTaken, "Key has already been taken for this category in the workspace."},
	{workspace.ErrVariableValueRequired, "A sensitive variable cannot become non-sensitive, or HCL, without its value being sent again."},
	{errStacksNotModelled, "Stacks are not modelled: Cairn has no stacks to apply a variable set to."},
	{errProjectOwnedSet, "Project-owned variable sets are not modelled: create the set in the organization and apply it to the project."},
	{workspace.ErrSelfConsumer, "A workspace cannot be a remote state consumer of itself: it always reads its own state."},
	{workspace.ErrSharedGlobally, "The workspace shares its state with every workspace (global-remote-state); set it to false before adding remote state consumers."},
	{trigger.ErrSelf, "A workspace cannot be its own run trigger source."},
	{trigger.ErrDuplicate, "Sourceable has already been taken: the workspace already has this source."},
	{trigger.ErrTooManySources, "A workspace can have at most 20 run trigger sources."},
	{fault.ErrValidation, "A value in the request is not valid."},
}

var (
	errInvalidDocument = fmt.Errorf("invalid document: %w", fault.ErrValidation)
	errAutoApply       = errors.New("auto-apply refused")
	errNotRun          = fmt.Errorf("assessments and auto-destroy are not run: %w", errInvalidDocument)
)

// writeError renders err as a JSON:API errors document. Missing and
// inaccessible resources share one identical document; nothing about the
// error's cause is ever included.
func (s *server) writeError(c *fiber.Ctx, err error) error {
	// The protocol's own refusals are the client's to fix: they are
	// answered, not logged as failures as unmapped errors are.
	var p httpx.Problem
	switch {
	case errors.Is(err, errInvalidDocument) || errors.Is(err, errAutoApply) || errors.Is(err, errProjectName):
		p = httpx.Problem{Status: http.StatusUnprocessableEntity, Code: "invalid_document"}
	case errors.Is(err, errVarsetAttribute) || errors.Is(err, workspace.ErrSelfConsumer) || errors.Is(err, workspace.ErrSharedGlobally) ||
		errors.Is(err, workspace.ErrToolVersionUnlisted),
		errors.Is(err, errDestroyPlan):
		// HCP refuses a variable set's or set variable's attributes, a
		// workspace allowing destroy plans or naming a tool version not
		// offered, and these remote-state-consumers changes, with 422.
		p = httpx.Problem{Status: http.StatusUnprocessableEntity, Code: "invalid_attribute"}
	case errors.Is(err, registry.ErrInvalid):
		// HCP refuses a registry module's or version's attributes with 422.
		p = httpx.Problem{Status: http.StatusUnprocessableEntity, Code: "invalid_attribute"}
	default:
		p = problem.Of(c.UserContext(), s.Logger, err)
	}
	id := httpx.RequestID(c)
	e := apiError{Status: strconv.Itoa(p.Status), Title: titleFor(p.Status), Code: p.Code, Meta: map[string]string{"request_id": id}}
	for _, d := range details {
		if errors.Is(err, d.err) {
			e.Detail = d.detail
			break
		}
	}
	// A refused variable set attribute is named by the domain's rule: fixed
	// text and the key at most, never a value.
	if _, rule, ok := strings.Cut(err.Error(), fault.ErrValidation.Error()+": "); ok && errors.Is(err, errVarsetAttribute) {
		e.Detail = rule + "."
	}
	// A refused run option names its attribute and the rule it broke, in
	// a sentence of Cairn's own (never the value sent).
	if oe, ok := run.OptionErrorOf(err); ok {
		attr := runOptionAttributes[oe.Field]
		e.Status, e.Title, e.Code = strconv.Itoa(http.StatusUnprocessableEntity), titleFor(http.StatusUnprocessableEntity), "invalid_attribute"
		e.Detail, e.Source = attr+": "+oe.Reason+".", &errorSource{Pointer: "/data/attributes/" + attr}
		p.Status = http.StatusUnprocessableEntity
	}
	// An attribute a fixed access level implies is named in HCP's words,
	// which clients match.
	var readOnly team.ReadOnlyAttributeError
	if errors.As(err, &readOnly) {
		e.Status, e.Title, e.Code = strconv.Itoa(http.StatusUnprocessableEntity), titleFor(http.StatusUnprocessableEntity), "invalid_attribute"
		e.Detail = readOnly.Error()
		p.Status = http.StatusUnprocessableEntity
	}
	// A refused cycle names the loop it would close.
	var cycle trigger.CycleError
	if errors.As(err, &cycle) {
		e.Detail = "The run trigger would create a cycle: " + strings.Join(cycle.Path, " → ") + "."
	}
	if p.RetryAfter > 0 {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(p.RetryAfter))
		c.Set(fiber.HeaderCacheControl, "private, no-store")
	}
	var buf bytes.Buffer
	_ = json.NewEncoder(&buf).Encode(map[string]any{"errors": []apiError{e}})
	c.Set(fiber.HeaderContentType, MediaType)
	return c.Status(p.Status).Send(buf.Bytes())
}

func titleFor(status int) string {
	switch status {
	case http.StatusNotFound:
		return "not found"
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusServiceUnavailable:
		return "service unavailable"
	case http.StatusConflict:
		return "conflict"
	case http.StatusUnprocessableEntity:
		return "invalid attribute"
	default:
		return http.StatusText(status)
	}
}
