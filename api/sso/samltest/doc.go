// Package samltest runs crewjam/saml's samlidp in the test process as the
// identity provider of SAML sign-in tests, drives its login like a browser
// without JavaScript (reading the auto-submitting forms), and forges the
// responses an attacker would send: re-signed with another key or SHA-1,
// with a second unsigned assertion, with changed audience, expiry or
// InResponseTo. Its admin routes are open, so it listens on 127.0.0.1 only.
package samltest
