// Package planjson streams OpenTofu's plan JSON (`tofu show -json`, format
// 1.x): it walks the top-level object token by token, checks the format
// version, hands each element of resource_changes to the caller one at a
// time, and skips every other part (variables, prior state, configuration,
// which hold sensitive values in clear) without holding it in memory. The
// plan diff and the policy input both read plans through it. It also writes
// the redacted plan a saved cloud plan's `tofu show` renders
// (WriteRedacted): the plan's changes with every sensitive value replaced,
// and the provider schemas they need.
package planjson
