// Package config reads every Cairn setting from the environment once, at
// process start, into one validated Config that main passes down. Secrets are
// typed so they cannot leak through logs or error text, and a missing or weak
// secret is reported as absent so the surfaces that need it fail closed rather
// than falling back to a default.
package config
