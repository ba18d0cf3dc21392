package sso

import (
	"errors"
	"fmt"

	"github.com/cairnhq/cairn/api/platform/fault"
)

var (
	// ErrUnknownProvider names an identity provider that is not configured
	// or registered (or belongs to another organization).
	ErrUnknownProvider = fmt.Errorf("unknown identity provider: %w", fault.ErrNotFound)
	// ErrIdPUnconfigured means the instance IdP lacks its client ID, its
	// issuer or a strong enough secret: its sign-in is closed.
	ErrIdPUnconfigured = errors.New("identity provider not configured")
	// ErrSealUnavailable means CAIRN_MASTER_KEY is missing, so nothing that
	// must be sealed (PKCE verifiers, client secrets) can be kept.
	ErrSealUnavailable = errors.New("sealing unavailable")
	// ErrCallbackURL refuses a callbackURL off the dashboard's origin.
	ErrCallbackURL = fmt.Errorf("callbackURL must be on the dashboard's origin: %w", fault.ErrValidation)
	// ErrStateInvalid is a callback whose state no flow issued, or that
	// came back to another provider's callback.
	ErrStateInvalid = errors.New("sign-in state invalid")
	// ErrStateExpired is a callback for a flow that expired or was used.
	ErrStateExpired = errors.New("sign-in state expired or used")
	// ErrIdPError is an error the identity provider sent back instead of a
	// code, or a code it would not exchange.
	ErrIdPError = errors.New("identity provider refused the sign-in")
	// ErrIDTokenInvalid is an ID token whose signature, issuer, audience,
	// expiry or nonce does not check out.
	ErrIDTokenInvalid = errors.New("ID token invalid")
	// ErrEmailUnverified means the provider did not vouch for the address.
	ErrEmailUnverified = errors.New("e-mail address not verified by the identity provider")
	// ErrEmailDomain means an organization provider asserted an address
	// outside the domains registered for it.
	ErrEmailDomain = errors.New("e-mail address outside the provider's domains")
	// ErrTooManyGroups refuses an identity asserting more than maxGroups
	// groups.
	ErrTooManyGroups = errors.New("identity provider asserted too many groups")
	// ErrAccountDisabled is a sign-in for a deactivated account.
	ErrAccountDisabled = errors.New("account deactivated")
	// ErrAccountNotLinkable refuses to attach an identity provider's
	// account to an existing Cairn account that provider cannot vouch for
	// (see accountLinkable): the person signs in the way they always have.
	ErrAccountNotLinkable = errors.New("an account with this e-mail address already exists and this identity provider cannot sign in to it")
	// ErrCodeInvalid is a sign-in code that is unknown, expired, used or
	// presented without its browser's binding secret.
	ErrCodeInvalid = errors.New("sign-in code invalid")
	// ErrDomainTaken means another provider already serves the domain.
	ErrDomainTaken = errors.New("e-mail domain already has an SSO provider")
	// ErrSAMLUnavailable means this build serves no SAML provider.
	ErrSAMLUnavailable = errors.New("SAML sign-in unavailable")
)
