// Package policybuild builds policy versions: a River worker takes a
// pending version, extracts its sealed source into a fresh sandbox, runs
// the build program there (cairn-policy build, jobs/policyprogram: strict
// Rego v1 compilation under the committed capabilities manifest, the set's
// tests, a bundle), streams the bundle and test results back into sealed
// storage, and completes the version through the policy service, which
// publishes only when the committed digests agree. The worker itself never
// links the policy engine.
package policybuild
