package v1

import "github.com/danielgtaylor/huma/v2"

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
