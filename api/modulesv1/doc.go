// Package modulesv1 serves the private module registry to the OpenTofu and
// Terraform CLIs through their modules.v1 protocol, outside /v1: a module's
// resolvable versions, and a download answer naming a relative, signed,
// expiring archive URL that carries no bearer (the CLIs' download client
// sends none) and is bound to the organization, module, version and archive
// digest it was signed for. Requests other than that archive URL need a
// token that may read the organization's registry; another organization's
// module answers exactly as a missing one. A run token's downloads are
// recorded as the run's evidence.
package modulesv1
