package v1

import (
	"github.com/cairnhq/cairn/api/platform/notify"
	"github.com/danielgtaylor/huma/v2"

	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/credential"
	"github.com/cairnhq/cairn/api/github"
	"github.com/cairnhq/cairn/api/identity"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/api/registry"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/serviceaccount"
	"github.com/cairnhq/cairn/api/state"
	"github.com/cairnhq/cairn/api/team"
	"github.com/cairnhq/cairn/api/trigger"
	"github.com/cairnhq/cairn/api/varset"
	"github.com/cairnhq/cairn/api/workspace"
)

// Services are the domain services behind /v1, built by server.Assemble.
// Without a database they are nil and every protected operation fails
// closed before reaching them.
type Services struct {
	Audit           *audit.Service
	Identity        *identity.Service
	Workspaces      *workspace.Service
	ServiceAccounts *serviceaccount.Service
	Launch          *launch.Service
	Runs            *run.Service
	State           *state.Service
	Policies        *policy.Service
	Credentials     *credential.Service
	Teams           *team.Service
	// GitHub is the code-host app; nil without a database.
	GitHub *github.Service
	// RunEvents wakes live run streams when a run's log or status changes.
	RunEvents *notify.Hub
	// Registry is the private module registry.
	Registry *registry.Service
	// RegistryCodeHost publishes module versions from the code host.
	RegistryCodeHost *registry.CodeHost
	// Varsets is the organization's variable sets.
	Varsets *varset.Service
	// Triggers are run triggers between workspaces.
	Triggers *trigger.Service
}

// registerOperations registers every /v1 operation, grouped by domain.
func (a *API) registerOperations() {
	a.registerSpec()
	a.registerLaunchAccess()
	a.registerOrganization()
	a.registerToolVersions()
	a.registerProjects()
	a.registerWorkspaces()
	a.registerSharing()
	a.registerVariables()
	a.registerServiceAccounts()
	a.registerTeams()
	a.registerRegistry()
	a.registerVarsets()
	a.registerTeamAccess()
	a.registerMembers()
	a.registerAudit()
	a.registerUserTokens()
	a.registerState()
	a.registerStateOutputs()
	a.registerRuns()
	a.registerDownloads()
	a.registerLive()
	a.registerPolicies()
	a.registerCredentials()
	a.registerGitHub()
	a.registerSourceIngestions()
	a.registerRegistrySource()
	a.registerRunTriggers()
	a.checkAgentOperations()
}

// checkAgentOperations refuses to start when the published agent list
// names an operation that does not exist: a misspelt entry would silently
// take a tool away from agents.
func (a *API) checkAgentOperations() {
	registered := map[string]bool{}
	for _, item := range a.huma.OpenAPI().Paths {
		for _, op := range []*huma.Operation{item.Get, item.Post, item.Put, item.Patch, item.Delete} {
			if op != nil {
				registered[op.OperationID] = true
			}
		}
	}
	for name := range AgentOperations {
		if !registered[name] {
			panic("v1: agent operation " + name + " is not registered")
		}
	}
}
