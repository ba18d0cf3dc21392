package discovery

import "maps"

// ModulesV1Path is the module registry protocol's base path; the CLIs
// append <namespace>/<name>/<provider>/….
const ModulesV1Path = "/api/registry/v1/modules/"

// apiPath serves every version of the remote-backend API the CLIs look up:
// tfe.v2 (the cloud block), tfe.v2.1 (the remote backend), tfe.v2.2, and
// state.v2, which the legacy remote-state client asks for.
const apiPath = "/api/v2/"

var remoteBackend = map[string]string{"tfe.v2": apiPath, "tfe.v2.1": apiPath, "tfe.v2.2": apiPath, "state.v2": apiPath}

// Services are the host's services by ID, as paths relative to the host;
// with registry the module registry protocol is among them. login.v1 is
// not: it names the authorization server, which only the API knows.
func Services(registry bool) map[string]string {
	out := maps.Clone(remoteBackend)
	if registry {
		out["modules.v1"] = ModulesV1Path
	}
	return out
}
