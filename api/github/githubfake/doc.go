// Package githubfake plays the code host for tests: a real HTTP server,
// started by the test, that answers the REST routes Cairn's code-host app
// uses with the shapes the provider really returns, and replays the
// provider's own webhook examples (the npm package
// @octokit/webhooks-examples, pinned in testdata/octokit).
//
// It checks what the provider checks: the app's JSON Web Token is verified
// against the test key before an installation token is issued, and every
// installation route needs a live installation token for that
// installation. Tests can make a route lose its response after acting,
// fail temporarily, or run a hook before it answers (to race lifecycle
// events against a read). Extra routes are registered with Handle, which
// wraps them in the same fault injection.
package githubfake
