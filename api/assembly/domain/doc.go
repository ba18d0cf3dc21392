// Package domain builds Cairn's domain services from configuration, once,
// for every process that needs them: cairn-api serves them over its HTTP
// surfaces and cairn-worker runs their jobs. It sits below the surfaces and
// the sign-in stack (package assembly adds OAuth, SSO and SCIM for the API),
// so cairn-worker links neither Fiber, huma, the /v1 and /api/v2 handlers,
// nor SAML, OpenID Connect or SCIM.
package domain
