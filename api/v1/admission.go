package v1

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/danielgtaylor/huma/v2"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/launch"
)

// admission says how launch control admits a mutation (SPEC §1 rules 5–7).
// Every mutation names one, so a new operation cannot forget it. The check
// runs after authentication and before the handler: before any body is
// read, any upload is staged, or anything is written. A refusal is the
// non-disclosing 503 service_unavailable.
type admission int

const (
	admitUnset admission = iota
	// notAdmitted operations are never gated: identity credentials (user
	// and service-account tokens grant nothing by themselves; every use of
	// one on /api/v2 is admitted), revocations, cancellation, discarding a
	// run and recovery (rule 7).
	notAdmitted
	// admitOrganization is an organization- or project-wide mutation:
	// only an open public gate admits it (rule 5).
	admitOrganization
	// admitWorkspace, admitVariable and admitRun resolve the exact
	// workspace from the {id} path parameter, inside the caller's
	// organization; an unresolved one is judged organization-wide, so a
	// closed gate answers it exactly like an unknown workspace.
	admitWorkspace
	admitVariable
	admitRun
	// admitCredentialProfile resolves the workspace of the credential
	// profile the {id} path parameter names.
	admitCredentialProfile
	// admitSourceIngestion resolves the workspace of the source ingestion
	// the {id} path parameter names.
	admitSourceIngestion
	// admitWorkspaceGrant resolves the workspace of the team's workspace
	// access grant the {id} path parameter names.
	admitWorkspaceGrant
	// admitInHandler operations carry their ownership in the JSON body:
	// the handler resolves it and calls requireAdmission before writing
	// (creating a run also passes the new-run rule in its transaction).
	admitInHandler
)

const metaAdmission = "cairn.admission"

// admit is the middleware that runs an operation's admission.
func (a *API) admit(ctx huma.Context, next func(huma.Context)) {
	kind, _ := ctx.Operation().Metadata[metaAdmission].(admission)
	if kind == admitUnset || kind == notAdmitted || kind == admitInHandler {
		next(ctx)
		return
	}
	p, err := access.PrincipalFrom(ctx.Context())
	if err != nil {
		a.writeProblem(ctx, a.problemFor(ctx.Context(), err))
		return
	}
	subject, err := a.subjectOf(ctx.Context(), p, kind, ctx.Param("id"))
	if err == nil {
		err = a.requireAdmission(ctx.Context(), subject)
	}
	if err != nil {
		a.writeProblem(ctx, a.problemFor(ctx.Context(), err))
		return
	}
	next(ctx)
}

// requireAdmission admits a mutation of subject by launch.Admit: the gate
// or an exact canary pair, and no suspension.
func (a *API) requireAdmission(ctx context.Context, subject launch.Subject) error {
	_, err := a.deps.Services.Launch.Require(ctx, nil, subject)
	return err
}

// subjectOf is the bounded ownership projection of a request: the
// principal's organization and the exact workspace the path names, looked
// up only inside that organization.
func (a *API) subjectOf(ctx context.Context, p access.Principal, kind admission, resourceID string) (launch.Subject, error) {
	subject := launch.Subject{OrganizationID: p.OrganizationID}
	var query string
	switch kind {
	case admitOrganization:
		return subject, nil
	case admitWorkspace:
		query = `SELECT id FROM workspaces WHERE id = $1 AND organization_id = $2`
	case admitVariable:
		query = `SELECT workspace_id FROM workspace_variables WHERE id = $1 AND organization_id = $2`
	case admitRun:
		query = `SELECT workspace_id FROM runs WHERE id = $1 AND organization_id = $2`
	case admitCredentialProfile:
		query = `SELECT workspace_id FROM credential_profiles WHERE id = $1 AND organization_id = $2`
	case admitSourceIngestion:
		query = `SELECT workspace_id FROM source_ingestions WHERE id = $1 AND organization_id = $2`
	case admitWorkspaceGrant:
		query = `SELECT workspace_id FROM team_workspace_access WHERE id = $1 AND organization_id = $2`
	default:
		return launch.Subject{}, fmt.Errorf("admission %d has no ownership projection", kind)
	}
	return a.workspaceSubject(ctx, p, query, resourceID)
}

// workspaceSubject runs one ownership query; no row leaves the subject
// organization-wide.
func (a *API) workspaceSubject(ctx context.Context, p access.Principal, query string, args ...any) (launch.Subject, error) {
	subject := launch.Subject{OrganizationID: p.OrganizationID}
	if p.OrganizationID == "" {
		return subject, nil
	}
	err := a.deps.DB.GetContext(ctx, &subject.WorkspaceID, query, append(args, p.OrganizationID)...)
	if errors.Is(err, sql.ErrNoRows) {
		return subject, nil
	}
	if err != nil {
		return launch.Subject{}, fmt.Errorf("resolving ownership: %w", err)
	}
	return subject, nil
}

// admitWorkspaceID admits a mutation of a workspace named in a body.
func (a *API) admitWorkspaceID(ctx context.Context, p access.Principal, workspaceID string) error {
	subject, err := a.subjectOf(ctx, p, admitWorkspace, workspaceID)
	if err != nil {
		return err
	}
	return a.requireAdmission(ctx, subject)
}

// admitPolicyScope admits attaching or detaching at a scope: a workspace
// scope is that exact workspace; organization and project scopes are
// organization-wide.
func (a *API) admitPolicyScope(ctx context.Context, p access.Principal, scope, scopeID string) error {
	if scope == "workspace" {
		return a.admitWorkspaceID(ctx, p, scopeID)
	}
	return a.requireAdmission(ctx, launch.Subject{OrganizationID: p.OrganizationID})
}

// admitAttachment admits detaching an attachment of a set by the scope it
// is attached at.
func (a *API) admitAttachment(ctx context.Context, p access.Principal, setID, attachmentID string) error {
	subject, err := a.workspaceSubject(ctx, p, `SELECT scope_id FROM policy_attachments
		WHERE id = $1 AND policy_set_id = $2 AND scope = 'workspace' AND organization_id = $3`, attachmentID, setID)
	if err != nil {
		return err
	}
	return a.requireAdmission(ctx, subject)
}

// admitBody runs an admitInHandler operation's check for the caller and
// returns the refusal as the handler's error.
func (a *API) admitBody(ctx context.Context, check func(p access.Principal) error) error {
	p, err := access.PrincipalFrom(ctx)
	if err == nil {
		err = check(p)
	}
	if err != nil {
		return a.fail(ctx, err)
	}
	return nil
}
