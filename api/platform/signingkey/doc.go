// Package signingkey keeps RS256 signing keys for one purpose each: the
// workload-identity issuer's and the OpenID provider's ID tokens. Keys
// are generated on first need, sealed under the master key in PostgreSQL
// (so every API and worker process signs with the same key), published
// in a JWKS before they sign and after they stop, and rotated with
// overlap. A purpose's keys never sign for another: each ring reads and
// writes only its own rows, and a sealed key is bound to its purpose.
package signingkey
