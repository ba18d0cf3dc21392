package credential

import (
	"errors"

	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/signingkey"
)

var (
	// ErrPhaseUnsupported is a phase a provider's versions cannot have: a
	// standalone plan or apply, or speculative_plan for a generic secret.
	ErrPhaseUnsupported = errors.New("credential phase unsupported")
	// ErrSecretValueInvalid is a generic-secret value holding a NUL, found
	// before anything is sealed.
	ErrSecretValueInvalid = errors.New("credential secret value invalid")
	// ErrConfigurationInvalid is a malformed version configuration: an
	// unsafe or reserved environment name, a role ARN that is not one.
	ErrConfigurationInvalid = errors.New("credential configuration invalid")
	// ErrEnvironmentTooLarge is a generic environment map over its limit.
	ErrEnvironmentTooLarge = errors.New("credential environment map too large")
	// ErrProfileArchived is an action on an archived profile.
	ErrProfileArchived = errors.New("credential profile archived")
	// ErrVersionDisabled is an action on a revoked version.
	ErrVersionDisabled = errors.New("credential profile version disabled")
	// ErrTooManyProfiles is a workspace at its profile limit.
	ErrTooManyProfiles = errors.New("too many credential profiles")
	// ErrHMACKeyUnavailable means IDEMPOTENCY_HMAC_KEY is missing or weak:
	// a generic secret is neither sealed nor stored (503).
	ErrHMACKeyUnavailable = errors.New("idempotency HMAC key missing or weak")
	// ErrHandleInvalid is a handle that is unknown, expired, already
	// redeemed, or presented with another attempt, manifest or nonce.
	ErrHandleInvalid = errors.New("credential handle invalid")
	// ErrNoSigningKey means the OIDC issuer has no key it can sign with
	// (no master key to unseal one).
	ErrNoSigningKey = signingkey.ErrNoKey
)

// notFound hides every missing, cross-tenant or mismatched identifier
// behind the one answer.
var notFound = fault.ErrNotFound
