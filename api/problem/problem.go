package problem

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/credential"
	"github.com/cairnhq/cairn/api/github"
	"github.com/cairnhq/cairn/api/identity"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/oauth"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/failure"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/httpx"
	"github.com/cairnhq/cairn/api/platform/idempotency"
	"github.com/cairnhq/cairn/api/platform/reqid"
	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/api/registry"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/serviceaccount"
	"github.com/cairnhq/cairn/api/sso"
	"github.com/cairnhq/cairn/api/state"
	"github.com/cairnhq/cairn/api/team"
	"github.com/cairnhq/cairn/api/trigger"
	"github.com/cairnhq/cairn/api/varset"
	"github.com/cairnhq/cairn/api/workspace"
)

// table is the one place where errors become statuses and codes, for /v1
// and the identity server alike (the remote-backend API renders the same
// statuses as JSON:API documents). Rows are checked in order with
// errors.Is; the first match wins, so specific sentinels come before the
// generic ones they wrap.
var table = []struct {
	err     error
	problem httpx.Problem
}{
	{idempotency.ErrKeyMissing, httpx.Problem{Status: http.StatusBadRequest, Code: "IDEMPOTENCY_KEY_REQUIRED"}},
	{idempotency.ErrKeyInvalid, httpx.Problem{Status: http.StatusBadRequest, Code: "IDEMPOTENCY_KEY_INVALID"}},
	{idempotency.ErrKeyReused, httpx.Problem{Status: http.StatusConflict, Code: "IDEMPOTENCY_KEY_REUSED"}},
	{idempotency.ErrInProgress, httpx.Problem{Status: http.StatusConflict, Code: "IDEMPOTENCY_IN_PROGRESS"}},

	{httpx.ErrTooLarge, httpx.Problem{Status: http.StatusRequestEntityTooLarge, Code: httpx.CodePayloadTooLarge}},
	{httpx.ErrNotJSON, httpx.Problem{Status: http.StatusUnsupportedMediaType, Code: httpx.CodeUnsupportedMediaType}},

	{access.ErrStepUpRequired, httpx.Problem{Status: http.StatusForbidden, Code: "REAUTHENTICATION_REQUIRED"}},
	{identity.ErrInvalidCredentials, httpx.Problem{Status: http.StatusUnauthorized, Code: "INVALID_CREDENTIALS"}},
	{identity.ErrSSORequired, httpx.Problem{Status: http.StatusForbidden, Code: "SSO_REQUIRED"}},
	{identity.ErrRateLimited, httpx.Problem{Status: http.StatusTooManyRequests, Code: "RATE_LIMITED", RetryAfter: 60}},
	{identity.ErrBusy, httpx.Problem{Status: http.StatusServiceUnavailable, Code: "SIGN_IN_BUSY", RetryAfter: 2}},
	{identity.ErrEmailTaken, httpx.Problem{Status: http.StatusConflict, Code: "EMAIL_TAKEN"}},
	{identity.ErrSlugTaken, httpx.Problem{Status: http.StatusConflict, Code: "ORGANIZATION_SLUG_TAKEN"}},
	{identity.ErrLastOwner, httpx.Problem{Status: http.StatusConflict, Code: "LAST_OWNER"}},
	{identity.ErrMemberExists, httpx.Problem{Status: http.StatusConflict, Code: "MEMBER_EXISTS"}},
	{identity.ErrInvitationPending, httpx.Problem{Status: http.StatusConflict, Code: "INVITATION_PENDING"}},
	{identity.ErrInvitationClosed, httpx.Problem{Status: http.StatusConflict, Code: "INVITATION_NOT_PENDING"}},
	{identity.ErrInvitationExpired, httpx.Problem{Status: http.StatusGone, Code: "INVITATION_EXPIRED"}},
	{identity.ErrTooManyInvitations, httpx.Problem{Status: http.StatusConflict, Code: "TOO_MANY_INVITATIONS"}},

	{sso.ErrUnknownProvider, httpx.Problem{Status: http.StatusNotFound, Code: "SSO_PROVIDER_NOT_FOUND"}},
	{sso.ErrIdPUnconfigured, httpx.Problem{Status: http.StatusServiceUnavailable, Code: "IDP_UNCONFIGURED"}},
	{sso.ErrSealUnavailable, httpx.Problem{Status: http.StatusServiceUnavailable, Code: httpx.CodeUnavailable}},
	{sso.ErrSAMLUnavailable, httpx.Problem{Status: http.StatusServiceUnavailable, Code: "SAML_UNAVAILABLE"}},
	{sso.ErrCallbackURL, httpx.Problem{Status: http.StatusBadRequest, Code: "CALLBACK_URL_UNTRUSTED"}},
	{sso.ErrStateInvalid, httpx.Problem{Status: http.StatusBadRequest, Code: "SIGN_IN_STATE_INVALID"}},
	{sso.ErrStateExpired, httpx.Problem{Status: http.StatusBadRequest, Code: "SIGN_IN_STATE_EXPIRED"}},
	{sso.ErrIDTokenInvalid, httpx.Problem{Status: http.StatusUnauthorized, Code: "ID_TOKEN_INVALID"}},
	{sso.ErrIdPError, httpx.Problem{Status: http.StatusBadRequest, Code: "IDP_ERROR"}},
	{sso.ErrEmailUnverified, httpx.Problem{Status: http.StatusForbidden, Code: "EMAIL_NOT_VERIFIED"}},
	{sso.ErrEmailDomain, httpx.Problem{Status: http.StatusForbidden, Code: "SSO_EMAIL_DOMAIN_MISMATCH"}},
	{sso.ErrTooManyGroups, httpx.Problem{Status: http.StatusForbidden, Code: "SSO_TOO_MANY_GROUPS"}},
	{sso.ErrAccountDisabled, httpx.Problem{Status: http.StatusForbidden, Code: "ACCOUNT_DEACTIVATED"}},
	{sso.ErrAccountNotLinkable, httpx.Problem{Status: http.StatusConflict, Code: "ACCOUNT_NOT_LINKABLE"}},
	{sso.ErrCodeInvalid, httpx.Problem{Status: http.StatusBadRequest, Code: "SIGN_IN_CODE_INVALID"}},
	{sso.ErrDomainTaken, httpx.Problem{Status: http.StatusConflict, Code: "SSO_DOMAIN_TAKEN"}},
	{sso.ErrSAMLResponseInvalid, httpx.Problem{Status: http.StatusBadRequest, Code: "SAML_RESPONSE_INVALID"}},
	{sso.ErrSAMLMetadataInvalid, httpx.Problem{Status: http.StatusBadRequest, Code: "SAML_METADATA_INVALID"}},

	{workspace.ErrNameTaken, httpx.Problem{Status: http.StatusConflict, Code: "WORKSPACE_NAME_TAKEN"}},
	{workspace.ErrProjectNameTaken, httpx.Problem{Status: http.StatusConflict, Code: "PROJECT_NAME_TAKEN"}},
	{workspace.ErrProjectNotEmpty, httpx.Problem{Status: http.StatusConflict, Code: "PROJECT_NOT_EMPTY"}},
	{workspace.ErrVariableKeyTaken, httpx.Problem{Status: http.StatusConflict, Code: "WORKSPACE_VARIABLE_KEY_TAKEN"}},
	{workspace.ErrVariableValueRequired, httpx.Problem{Status: http.StatusBadRequest, Code: "WORKSPACE_VARIABLE_VALUE_REQUIRED"}},
	{workspace.ErrInvalidHCL, httpx.Problem{Status: http.StatusBadRequest, Code: "WORKSPACE_VARIABLE_HCL_INVALID"}},
	{workspace.ErrToolVersionUnlisted, httpx.Problem{Status: http.StatusUnprocessableEntity, Code: "WORKSPACE_TOOL_VERSION_UNLISTED"}},
	{varset.ErrNameTaken, httpx.Problem{Status: http.StatusConflict, Code: "VARIABLE_SET_NAME_TAKEN"}},
	{varset.ErrKeyTaken, httpx.Problem{Status: http.StatusConflict, Code: "VARIABLE_SET_VARIABLE_KEY_TAKEN"}},
	{varset.ErrValueRequired, httpx.Problem{Status: http.StatusBadRequest, Code: "VARIABLE_SET_VARIABLE_VALUE_REQUIRED"}},
	{varset.ErrInvalidCursor, httpx.Problem{Status: http.StatusBadRequest, Code: "VARIABLE_SET_LIST_CURSOR_INVALID"}},
	{team.ErrNameTaken, httpx.Problem{Status: http.StatusConflict, Code: "TEAM_NAME_TAKEN"}},
	{team.ErrSSOTeamIDTaken, httpx.Problem{Status: http.StatusConflict, Code: "TEAM_SSO_TEAM_ID_TAKEN"}},
	{team.ErrGrantExists, httpx.Problem{Status: http.StatusConflict, Code: "TEAM_ACCESS_EXISTS"}},
	{team.ErrOwnersTeam, httpx.Problem{Status: http.StatusConflict, Code: "OWNERS_TEAM_FIXED"}},
	{team.ErrOwnersTeamEmpty, httpx.Problem{Status: http.StatusConflict, Code: "OWNERS_TEAM_EMPTY"}},
	{serviceaccount.ErrNameTaken, httpx.Problem{Status: http.StatusConflict, Code: "SERVICE_ACCOUNT_NAME_TAKEN"}},
	{serviceaccount.ErrInvalidToken, httpx.Problem{Status: http.StatusUnauthorized, Code: "invalid_token"}},
	{identity.ErrInvalidToken, httpx.Problem{Status: http.StatusUnauthorized, Code: "invalid_token"}},
	{team.ErrInvalidToken, httpx.Problem{Status: http.StatusUnauthorized, Code: "invalid_token"}},
	{workspace.ErrLocked, httpx.Problem{Status: http.StatusConflict, Code: "WORKSPACE_LOCKED"}},
	{workspace.ErrLockedCannotDelete, httpx.Problem{Status: http.StatusConflict, Code: "WORKSPACE_LOCKED"}},
	{workspace.ErrManagingResources, httpx.Problem{Status: http.StatusConflict, Code: "WORKSPACE_MANAGING_RESOURCES"}},
	{workspace.ErrForceDeleteOwnersOnly, httpx.Problem{Status: http.StatusConflict, Code: "WORKSPACE_FORCE_DELETE_OWNERS_ONLY"}},
	{workspace.ErrNotLocked, httpx.Problem{Status: http.StatusConflict, Code: "WORKSPACE_NOT_LOCKED"}},
	{workspace.ErrLockedByOther, httpx.Problem{Status: http.StatusConflict, Code: "WORKSPACE_LOCKED_BY_OTHER"}},
	{workspace.ErrLockedByRun, httpx.Problem{Status: http.StatusConflict, Code: "WORKSPACE_LOCKED_BY_RUN"}},
	{workspace.ErrLockedByTeam, httpx.Problem{Status: http.StatusConflict, Code: "WORKSPACE_LOCKED_BY_TEAM"}},
	{state.ErrNotLockedByWriter, httpx.Problem{Status: http.StatusConflict, Code: "WORKSPACE_NOT_LOCKED_BY_WRITER"}},
	{state.ErrConflict, httpx.Problem{Status: http.StatusConflict, Code: "STATE_VERSION_CONFLICT"}},
	{state.ErrChecksumMismatch, httpx.Problem{Status: http.StatusUnprocessableEntity, Code: "STATE_CHECKSUM_MISMATCH"}},
	{state.ErrTooLarge, httpx.Problem{Status: http.StatusRequestEntityTooLarge, Code: httpx.CodePayloadTooLarge}},
	{state.ErrWriterRevoked, httpx.Problem{Status: http.StatusForbidden, Code: "STATE_WRITER_REVOKED"}},
	{launch.ErrVersionConflict, httpx.Problem{Status: http.StatusConflict, Code: "LAUNCH_CONTROL_VERSION_CONFLICT"}},
	{launch.ErrKeyReused, httpx.Problem{Status: http.StatusConflict, Code: "IDEMPOTENCY_KEY_REUSED"}},
	{launch.ErrSuspensionVersionConflict, httpx.Problem{Status: http.StatusConflict, Code: "SUSPENSION_VERSION_CONFLICT"}},
	{launch.ErrSuspensionUnchanged, httpx.Problem{Status: http.StatusConflict, Code: "SUSPENSION_UNCHANGED"}},

	{run.ErrStaleBinding, httpx.Problem{Status: http.StatusConflict, Code: "RUN_REVIEW_STALE"}},
	{run.ErrActionNotAllowed, httpx.Problem{Status: http.StatusConflict, Code: "RUN_ACTION_NOT_ALLOWED"}},
	{run.ErrQueueNotDiscardable, httpx.Problem{Status: http.StatusConflict, Code: "RUN_QUEUE_NOT_DISCARDABLE"}},
	{run.ErrConfigurationNotReady, httpx.Problem{Status: http.StatusConflict, Code: "CONFIGURATION_VERSION_NOT_UPLOADED"}},
	{run.ErrConfigurationUploaded, httpx.Problem{Status: http.StatusConflict, Code: "CONFIGURATION_VERSION_ALREADY_UPLOADED"}},
	{run.ErrConfigurationCurrent, httpx.Problem{Status: http.StatusConflict, Code: "CONFIGURATION_VERSION_CURRENT"}},
	{run.ErrConfigurationNotArchivable, httpx.Problem{Status: http.StatusConflict, Code: "CONFIGURATION_VERSION_NOT_ARCHIVABLE"}},
	{run.ErrRecoveryLeaseHeld, httpx.Problem{Status: http.StatusConflict, Code: "RUN_RECOVERY_LEASE_HELD"}},
	{run.ErrRecoveryEvidence, httpx.Problem{Status: http.StatusConflict, Code: "RUN_RECOVERY_EVIDENCE_MISMATCH"}},
	{run.ErrRecoveryConfirmation, httpx.Problem{Status: http.StatusBadRequest, Code: "RUN_RECOVERY_CONFIRMATION_REQUIRED"}},
	{run.ErrAutoApply, httpx.Problem{Status: http.StatusBadRequest, Code: "RUN_AUTO_APPLY_UNSUPPORTED"}},
	{run.ErrDestroy, httpx.Problem{Status: http.StatusBadRequest, Code: "RUN_DESTROY_UNSUPPORTED"}},
	{run.ErrPolicyGateClosed, httpx.Problem{Status: http.StatusConflict, Code: "RUN_POLICY_GATE_CLOSED"}},
	{run.ErrAlreadyReleased, httpx.Problem{Status: http.StatusConflict, Code: "RUN_ALREADY_RELEASED"}},
	{run.ErrNotReleasable, httpx.Problem{Status: http.StatusConflict, Code: "RUN_NOT_RELEASABLE"}},
	{policy.ErrSetNameTaken, httpx.Problem{Status: http.StatusConflict, Code: "POLICY_SET_NAME_TAKEN"}},
	{policy.ErrVersionNotPublished, httpx.Problem{Status: http.StatusConflict, Code: "POLICY_VERSION_NOT_PUBLISHED"}},
	{policy.ErrAlreadyAttached, httpx.Problem{Status: http.StatusConflict, Code: "POLICY_SET_ALREADY_ATTACHED"}},
	{policy.ErrAttachmentDetached, httpx.Problem{Status: http.StatusConflict, Code: "POLICY_ATTACHMENT_DETACHED"}},
	{policy.ErrCompletionConflict, httpx.Problem{Status: http.StatusConflict}},
	{policy.ErrSourceMismatch, httpx.Problem{Status: http.StatusConflict, Code: "POLICY_SOURCE_MISMATCH"}},
	{policy.ErrOverrideStale, httpx.Problem{Status: http.StatusConflict, Code: "POLICY_RESULT_STALE"}},
	{run.ErrArtifactUnavailable, httpx.Problem{Status: http.StatusNotFound, Code: "RUN_ARTIFACT_NOT_RECORDED"}},
	{run.ErrInvalidToken, httpx.Problem{Status: http.StatusUnauthorized, Code: "invalid_token"}},
	{oauth.ErrInvalidToken, httpx.Problem{Status: http.StatusUnauthorized, Code: "invalid_token"}},
	{oauth.ErrInsufficientScope, httpx.Problem{Status: http.StatusForbidden, Code: "insufficient_scope"}},
	{oauth.ErrRequestExpired, httpx.Problem{Status: http.StatusBadRequest, Code: "OAUTH_REQUEST_EXPIRED"}},

	{credential.ErrPhaseUnsupported, httpx.Problem{Status: http.StatusBadRequest, Code: "CREDENTIAL_PROFILE_PHASE_UNSUPPORTED"}},
	{credential.ErrSecretValueInvalid, httpx.Problem{Status: http.StatusBadRequest, Code: "CREDENTIAL_SECRET_VALUE_INVALID"}},
	{credential.ErrConfigurationInvalid, httpx.Problem{Status: http.StatusBadRequest, Code: "CREDENTIAL_CONFIGURATION_INVALID"}},
	{credential.ErrEnvironmentTooLarge, httpx.Problem{Status: http.StatusRequestEntityTooLarge, Code: httpx.CodePayloadTooLarge}},
	{credential.ErrProfileArchived, httpx.Problem{Status: http.StatusConflict, Code: "CREDENTIAL_PROFILE_ARCHIVED"}},
	{credential.ErrVersionDisabled, httpx.Problem{Status: http.StatusConflict, Code: "CREDENTIAL_PROFILE_VERSION_DISABLED"}},
	{credential.ErrTooManyProfiles, httpx.Problem{Status: http.StatusConflict, Code: "CREDENTIAL_PROFILE_LIMIT_REACHED"}},
	{credential.ErrHMACKeyUnavailable, httpx.Problem{Status: http.StatusServiceUnavailable, Code: httpx.CodeUnavailable}},
	{github.ErrSignature, httpx.Problem{Status: http.StatusUnauthorized, Code: "WEBHOOK_SIGNATURE_INVALID"}},
	{github.ErrUnconfigured, httpx.Problem{Status: http.StatusServiceUnavailable, Code: httpx.CodeUnavailable}},
	{github.ErrDeliveryConflict, httpx.Problem{Status: http.StatusConflict, Code: "WEBHOOK_DELIVERY_CONFLICT"}},
	{github.ErrFenceRace, httpx.Problem{Status: http.StatusConflict, Code: "GITHUB_INSTALLATION_CHANGED", RetryAfter: 1}},
	{github.ErrSettingsConflict, httpx.Problem{Status: http.StatusConflict, Code: "WORKSPACE_SOURCE_SETTINGS_CONFLICT"}},
	{github.ErrStateInvalid, httpx.Problem{Status: http.StatusBadRequest, Code: "GITHUB_INSTALLATION_STATE_INVALID"}},
	{github.ErrInstallerUnverified, httpx.Problem{Status: http.StatusForbidden, Code: "GITHUB_INSTALLER_UNVERIFIED"}},
	{github.ErrInstallationInactive, httpx.Problem{Status: http.StatusConflict, Code: "GITHUB_INSTALLATION_INACTIVE"}},
	{github.ErrNotHeld, httpx.Problem{Status: http.StatusConflict, Code: "SOURCE_INGESTION_NOT_HELD"}},
	{github.ErrCommitMismatch, httpx.Problem{Status: http.StatusConflict, Code: "SOURCE_INGESTION_COMMIT_MISMATCH"}},
	{registry.ErrInvalidCursor, httpx.Problem{Status: http.StatusBadRequest, Code: "REGISTRY_LIST_CURSOR_INVALID"}},
	{registry.ErrModuleExists, httpx.Problem{Status: http.StatusConflict, Code: "REGISTRY_MODULE_EXISTS"}},
	{registry.ErrVersionExists, httpx.Problem{Status: http.StatusConflict, Code: "REGISTRY_MODULE_VERSION_EXISTS"}},
	{registry.ErrVersionNotPending, httpx.Problem{Status: http.StatusConflict, Code: "REGISTRY_MODULE_VERSION_IMMUTABLE"}},
	{registry.ErrNotDeprecated, httpx.Problem{Status: http.StatusConflict, Code: "REGISTRY_MODULE_VERSION_NOT_DEPRECATED"}},
	{registry.ErrRevoked, httpx.Problem{Status: http.StatusConflict, Code: "REGISTRY_MODULE_VERSION_REVOKED"}},
	{registry.ErrNotRevoked, httpx.Problem{Status: http.StatusConflict, Code: "REGISTRY_MODULE_VERSION_NOT_REVOKED"}},
	{registry.ErrNotPublished, httpx.Problem{Status: http.StatusConflict, Code: "REGISTRY_MODULE_VERSION_NOT_PUBLISHED"}},
	{registry.ErrNotBound, httpx.Problem{Status: http.StatusConflict, Code: "REGISTRY_MODULE_NOT_BOUND"}},
	{registry.ErrSourceUnavailable, httpx.Problem{Status: http.StatusConflict, Code: "REGISTRY_MODULE_SOURCE_UNAVAILABLE"}},
	{trigger.ErrSelf, httpx.Problem{Status: http.StatusUnprocessableEntity, Code: "RUN_TRIGGER_SELF"}},
	{trigger.ErrDuplicate, httpx.Problem{Status: http.StatusUnprocessableEntity, Code: "RUN_TRIGGER_EXISTS"}},
	{trigger.ErrTooManySources, httpx.Problem{Status: http.StatusUnprocessableEntity, Code: "RUN_TRIGGER_LIMIT_REACHED"}},
	{trigger.ErrCycle, httpx.Problem{Status: http.StatusUnprocessableEntity, Code: "RUN_TRIGGER_CYCLE"}},
	{fault.ErrNotFound, httpx.Problem{Status: http.StatusNotFound, Code: httpx.CodeNotFound}},
	{fault.ErrUnauthenticated, httpx.Problem{Status: http.StatusUnauthorized, Code: httpx.CodeUnauthenticated}},
	{fault.ErrForbidden, httpx.Problem{Status: http.StatusForbidden, Code: httpx.CodeForbidden}},
	{fault.ErrUnavailable, httpx.Problem{Status: http.StatusServiceUnavailable, Code: httpx.CodeUnavailable}},
	{fault.ErrAdmissionClosed, httpx.Problem{Status: http.StatusServiceUnavailable, Code: httpx.CodeServiceUnavailable, RetryAfter: httpx.AdmissionRetryAfterSeconds}},
	{fault.ErrValidation, httpx.Problem{Status: http.StatusBadRequest, Code: httpx.CodeValidationFailed}},
	{fault.ErrConflict, httpx.Problem{Status: http.StatusConflict, Code: "CONFLICT"}},
	// Rejected audit evidence is our bug, not the caller's: a bounded 500.
	{audit.ErrEvidenceRejected, httpx.Problem{Status: http.StatusInternalServerError, Code: httpx.CodeInternal}},
}

// Coded is an error that already names its public problem, for the few
// codes that depend on where they happen (each cursor list has its own
// *_LIST_CURSOR_INVALID code).
type Coded struct{ Problem httpx.Problem }

func (e Coded) Error() string { return e.Problem.Code }

// Of maps err to its public problem. Anything unmapped is answered as a
// bare 500 and reported as an unhandled failure (its classification and
// the request ID); its text reaches neither the client nor the log.
func Of(ctx context.Context, logger *slog.Logger, err error) httpx.Problem {
	var coded Coded
	if errors.As(err, &coded) {
		return coded.Problem
	}
	var limited identity.RateLimitedError
	if errors.As(err, &limited) {
		// The wait is the throttle's own, rounded up to whole seconds.
		return httpx.Problem{Status: http.StatusTooManyRequests, Code: "RATE_LIMITED",
			RetryAfter: int(math.Ceil(max(limited.RetryAfter, time.Second).Seconds()))}
	}
	var oauthErr *oauth.Error
	if errors.As(err, &oauthErr) {
		// A protocol error met outside the protocol's own endpoints (the
		// dashboard's consent calls) keeps its status and names its code.
		return httpx.Problem{Status: oauthErr.Status, Code: "OAUTH_" + strings.ToUpper(oauthErr.Code)}
	}
	var sourceErr policy.SourceError
	if errors.As(err, &sourceErr) {
		return httpx.Problem{Status: http.StatusUnprocessableEntity, Code: "POLICY_SOURCE_" + strings.ToUpper(sourceErr.Code)}
	}
	if oe, ok := run.OptionErrorOf(err); ok {
		// Each refused run option names itself; a tool version names why.
		switch {
		case errors.Is(err, run.ErrToolVersionPlanOnly):
			return httpx.Problem{Status: http.StatusBadRequest, Code: "RUN_TOOL_VERSION_PLAN_ONLY"}
		case errors.Is(err, run.ErrToolVersionUnsupported):
			return httpx.Problem{Status: http.StatusBadRequest, Code: "RUN_TOOL_VERSION_UNSUPPORTED"}
		}
		return httpx.Problem{Status: http.StatusBadRequest, Code: "RUN_" + strings.ToUpper(oe.Field) + "_INVALID"}
	}
	var archiveErr run.ArchiveError
	if errors.As(err, &archiveErr) {
		// Each refused archive names its own reason.
		return httpx.Problem{Status: http.StatusUnprocessableEntity, Code: "CONFIGURATION_" + strings.ToUpper(archiveErr.Code)}
	}
	for _, row := range table {
		if errors.Is(err, row.err) {
			if row.problem.Status >= 500 {
				// A mapped 5xx names its fixed code, never the error's
				// text, which can carry the request's input.
				logger.WarnContext(ctx, "operation unavailable", "request_id", reqid.From(ctx),
					"status", row.problem.Status, "code", row.problem.Code)
			}
			return row.problem
		}
	}
	if errors.Is(err, context.Canceled) {
		return httpx.Problem{Status: 499, Code: "CLIENT_CLOSED_REQUEST"}
	}
	if db.Unreachable(err) {
		// A dependency that is down is not our bug: the caller may retry.
		logger.WarnContext(ctx, "database unreachable", "request_id", reqid.From(ctx), "error", err)
		return httpx.Problem{Status: http.StatusServiceUnavailable, Code: httpx.CodeUnavailable}
	}
	failure.Report(ctx, logger, err, failure.RequestID(reqid.From(ctx)))
	return httpx.Problem{Status: http.StatusInternalServerError, Code: httpx.CodeInternal}
}
