package v1

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/oauth"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/httpx"
)

// AgentAuthenticator resolves an agent's OAuth access token to the
// principal it acts as (oauth.Service).
type AgentAuthenticator interface {
	AuthenticateAccessToken(ctx context.Context, token string) (access.Principal, error)
}

// agentAccess is whether, and how, an operation is on the published agent
// operation list. Every operation names none unless it says otherwise, so
// a new operation is never open to agents by accident.
type agentAccess int

const (
	agentNone agentAccess = iota
	// agentRead operations need mcp:tools.
	agentRead
	// agentWrite operations are mutations and need mcp:tools and mcp:write.
	agentWrite
)

const (
	metaAgent = "cairn.agent"
	// agentScheme is the contract's security scheme of agent tokens.
	agentScheme = "agent"
	// AgentOperationsExtension lists, in the contract's info, the
	// operations an agent token may call.
	AgentOperationsExtension = "x-cairn-agent-operations"
)

// AgentOperations is the published agent operation list: the only /v1
// operations an agent's bearer token reaches. Agents read, upload
// configurations, start plan runs, cancel and reject; approving,
// overriding policy, recovery and restricted downloads are not here, and
// register refuses to put them here.
var AgentOperations = map[string]agentAccess{
	"list-projects":                 agentRead,
	"get-project":                   agentRead,
	"list-workspaces":               agentRead,
	"get-workspace":                 agentRead,
	"list-runs":                     agentRead,
	"get-run":                       agentRead,
	"list-run-logs":                 agentRead,
	"get-run-plan-changes":          agentRead,
	"get-run-policy":                agentRead,
	"list-workspace-state-versions": agentRead,
	"get-state-version":             agentRead,
	"upload-configuration-version":  agentWrite,
	"create-run":                    agentWrite,
	"cancel-run":                    agentWrite,
	"reject-run":                    agentWrite,
}

// humanOnlyOperations may never join the agent list: agents propose,
// people decide.
var humanOnlyOperations = []string{"approve-run", "override-run-policy", "recover-run"}

// agentAccessOf is the operation's place on the list, checked against the
// operation itself: a mutation must be agentWrite and a read agentRead.
func agentAccessOf(op huma.Operation, mutating bool) agentAccess {
	level := AgentOperations[op.OperationID]
	switch {
	case level == agentNone:
		return agentNone
	case slices.Contains(humanOnlyOperations, op.OperationID):
		panic("v1: " + op.OperationID + " is a human decision and cannot be an agent operation")
	case mutating != (level == agentWrite):
		panic("v1: agent operation " + op.OperationID + " must be agentWrite exactly when it is a mutation")
	}
	return level
}

// authenticateBearer judges a request that sent an Authorization header on
// that header alone: never a cookie. Only an agent access token is a /v1
// bearer credential (service-account and run tokens belong to /api/v2),
// and only on the published agent operations, with mcp:write for
// mutations.
func (a *API) authenticateBearer(ctx huma.Context, header string, next func(huma.Context)) {
	scheme, token, ok := strings.Cut(header, " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" || a.deps.Agents == nil {
		a.writeProblem(ctx, httpx.Problem{Status: http.StatusUnauthorized, Code: httpx.CodeUnauthenticated})
		return
	}
	principal, err := a.deps.Agents.AuthenticateAccessToken(ctx.Context(), token)
	switch {
	case errors.Is(err, oauth.ErrInvalidToken):
		// The same 401 as any other unauthenticated call (sst_ and rat_
		// tokens included), with the RFC 6750 challenge.
		ctx.SetHeader("WWW-Authenticate", `Bearer error="invalid_token"`)
		a.writeProblem(ctx, httpx.Problem{Status: http.StatusUnauthorized, Code: httpx.CodeUnauthenticated})
		return
	case errors.Is(err, oauth.ErrInsufficientScope):
		a.insufficientScope(ctx, access.ScopeMCPTools)
		return
	case err != nil:
		a.writeProblem(ctx, a.problemFor(ctx.Context(), err))
		return
	}
	level, _ := ctx.Operation().Metadata[metaAgent].(agentAccess)
	switch {
	case level == agentNone:
		a.writeProblem(ctx, a.problemFor(ctx.Context(), errNotAgentOperation))
		return
	case level == agentWrite && !principal.Agent.Write:
		a.insufficientScope(ctx, access.ScopeMCPTools+" "+access.ScopeMCPWrite)
		return
	}
	next(huma.WithContext(ctx, access.WithPrincipal(ctx.Context(), principal)))
}

// errNotAgentOperation refuses an agent outside the published list: the
// token is valid, the operation is not its to call.
var errNotAgentOperation = errors.Join(fault.ErrForbidden, errors.New("not an agent operation"))

func (a *API) insufficientScope(ctx huma.Context, scope string) {
	ctx.SetHeader("WWW-Authenticate", `Bearer error="insufficient_scope", scope="`+scope+`"`)
	a.writeProblem(ctx, httpx.Problem{Status: http.StatusForbidden, Code: "insufficient_scope"})
}
