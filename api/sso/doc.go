// Package sso signs people in through identity providers: the instance's
// own (IDP_CLIENT_ID and friends, "Continue with …") and the OIDC or SAML
// providers an organization's owners register for their e-mail domains.
// Every such sign-in runs as a flow (state, nonce, PKCE) that lives ten
// minutes and is used once; its end is one function, CompleteSignIn, that
// links or creates the account by verified e-mail, adds the member just in
// time, makes their teams follow the asserted groups, starts the session
// and hands the dashboard a one-time code for it — all in one transaction.
// The API never sets a cookie on the IdP's redirect: the dashboard redeems
// the code with the browser-bound secret whose hash started the flow.
package sso
