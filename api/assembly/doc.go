// Package assembly builds what cairn-api serves: the domain services of
// package domain and, beside them, the sign-in surfaces only the API runs
// (the agents' OAuth server, SSO and SCIM). It imports no HTTP framework;
// the surfaces mount what it returns.
package assembly
