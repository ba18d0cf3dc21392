package v1

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/credential"
	"github.com/cairnhq/cairn/api/platform/cursor"
	"github.com/cairnhq/cairn/api/platform/httpx"
)

// CreateCredentialProfileRequest is the body of POST
// /v1/workspaces/{id}/credential-profiles.
type CreateCredentialProfileRequest struct {
	Provider string `json:"provider" enum:"aws,gcp,azure,generic_secret"`
	Name     string `json:"name,omitempty" maxLength:"400" doc:"Display name, 1–100 characters; the provider's name when omitted."`
}

type createCredentialProfileInput struct {
	IdempotencyHeader
	IDPath
	Body CreateCredentialProfileRequest
}

// CreateCredentialVersionRequest is the body of POST
// /v1/credential-profiles/{id}/versions.
type CreateCredentialVersionRequest struct {
	Audience string `json:"audience,omitempty" maxLength:"512" doc:"The token audience of a federation (its cloud's default when omitted); a generic secret's is always cairn:generic-secret."`
	Phase    string `json:"phase" maxLength:"32" doc:"plan_and_apply, or speculative_plan for a federation; anything else is 400 CREDENTIAL_PROFILE_PHASE_UNSUPPORTED."`
	// Configuration is decoded by the credential package: its shape
	// depends on the provider, and a generic map's values must never be
	// echoed by a schema error.
	Configuration json.RawMessage `json:"configuration" doc:"aws: {role_arn}; gcp: {workload_identity_provider, service_account}; azure: {tenant_id, client_id, subscription_id?}; generic_secret: {environment: {NAME: value}} (1–32 names, at most 64 KiB as canonical JSON, write-only)."`
}

type createCredentialVersionInput struct {
	IdempotencyHeader
	IDPath
	Body CreateCredentialVersionRequest
}

// EmptyRequest is the exact empty object an action takes.
type EmptyRequest struct{}

type credentialProfileActionInput struct {
	IdempotencyHeader
	IDPath
	Body EmptyRequest
}

// CredentialVersionPath names a version of a profile.
type CredentialVersionPath struct {
	IDPath
	VersionID string `path:"versionId" maxLength:"64"`
}

type credentialVersionActionInput struct {
	IdempotencyHeader
	CredentialVersionPath
}

type credentialVersionRevokeInput struct {
	IdempotencyHeader
	CredentialVersionPath
	Body EmptyRequest
}

type credentialListInput struct {
	IDPath
	ListParams
}

// CredentialProfileView is a credential profile. No read returns a
// secret: a generic profile shows only the names its current version sets.
type CredentialProfileView struct {
	ID               string                 `json:"id" doc:"Credential profile ID (cpr_…)."`
	Object           string                 `json:"object" enum:"credential_profile"`
	WorkspaceID      string                 `json:"workspace_id"`
	Provider         string                 `json:"provider" enum:"aws,gcp,azure,generic_secret"`
	Name             string                 `json:"name"`
	State            string                 `json:"state" enum:"draft,active,archived" doc:"A draft is detached (runs leave it out) until a version is verified; an active profile is needed by every run."`
	CurrentVersionID *string                `json:"current_version_id"`
	CurrentVersion   *CredentialVersionView `json:"current_version"`
	Subjects         map[string]string      `json:"subjects,omitempty" doc:"The workload-identity subject per run phase (plan, apply, speculative_plan); federations only."`
	VersionCount     int                    `json:"version_count"`
	ArchivedAt       *time.Time             `json:"archived_at"`
	CreatedAt        time.Time              `json:"created_at"`
	UpdatedAt        time.Time              `json:"updated_at"`
}

// CredentialVersionView is one immutable version. A generic secret's
// configuration is always null: its values are write-only.
type CredentialVersionView struct {
	ID               string                       `json:"id" doc:"Credential profile version ID (cpv_…)."`
	Object           string                       `json:"object" enum:"credential_profile_version"`
	ProfileID        string                       `json:"profile_id"`
	Number           int                          `json:"number"`
	Provider         string                       `json:"provider" enum:"aws,gcp,azure,generic_secret"`
	Audience         string                       `json:"audience"`
	Phase            string                       `json:"phase" enum:"plan_and_apply,speculative_plan"`
	Configuration    *credential.FederationConfig `json:"configuration" doc:"A federation's configuration; null for a generic secret."`
	EnvironmentNames []string                     `json:"environment_names" doc:"The names a generic secret sets (never their values); those a federation sets."`
	Verified         bool                         `json:"verified"`
	VerifiedAt       *time.Time                   `json:"verified_at"`
	Disabled         bool                         `json:"disabled" doc:"Revoked: never issued again."`
	DisabledAt       *time.Time                   `json:"disabled_at"`
	CreatedAt        time.Time                    `json:"created_at"`
}

func credentialVersionView(v credential.Version) CredentialVersionView {
	out := CredentialVersionView{ID: v.ID, Object: "credential_profile_version", ProfileID: v.ProfileID, Number: v.Number,
		Provider: v.Provider, Audience: v.Audience, Phase: v.Phase, EnvironmentNames: []string(v.EnvironmentNames),
		Verified: v.VerifiedAt != nil, VerifiedAt: v.VerifiedAt, Disabled: v.DisabledAt != nil, DisabledAt: v.DisabledAt,
		CreatedAt: v.CreatedAt}
	if credential.Federated(v.Provider) {
		if v.Configuration != nil {
			cfg := v.Configuration.FederationConfig
			out.Configuration = &cfg
		}
		out.EnvironmentNames = credential.VersionEnvironmentNames(v)
	}
	if out.EnvironmentNames == nil {
		out.EnvironmentNames = []string{}
	}
	return out
}

func credentialProfileView(d credential.Detail) CredentialProfileView {
	out := CredentialProfileView{ID: d.ID, Object: "credential_profile", WorkspaceID: d.WorkspaceID, Provider: d.Provider,
		Name: d.Name, State: d.State(), CurrentVersionID: d.CurrentVersionID, Subjects: d.Subjects(), VersionCount: d.VersionCount,
		ArchivedAt: d.ArchivedAt, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt}
	if d.Current != nil {
		v := credentialVersionView(*d.Current)
		out.CurrentVersion = &v
	}
	return out
}

var (
	credentialProfileList = listSpec{endpoint: "credential-profiles", invalidCode: "CREDENTIAL_PROFILE_LIST_CURSOR_INVALID"}
	credentialVersionList = listSpec{endpoint: "credential-profile-versions", invalidCode: "CREDENTIAL_PROFILE_VERSION_LIST_CURSOR_INVALID"}
)

func (a *API) registerCredentials() {
	tags := []string{"Credential profiles"}
	creds := func() *credential.Service { return a.deps.Services.Credentials }

	register(a, huma.Operation{
		OperationID: "create-credential-profile", Method: http.MethodPost, Path: "/v1/workspaces/{id}/credential-profiles",
		Summary: "Add a credential profile to a workspace", Tags: tags, DefaultStatus: http.StatusCreated,
		Description: "A detached draft: runs leave it out until one of its versions is verified. Needs credential:write.",
	}, operationOptions{mutation: true, admit: admitWorkspace, bodyLimit: credential.DocumentLimit}, func(ctx context.Context, in *createCredentialProfileInput) (*Mutated[CredentialProfileView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusCreated,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (CredentialProfileView, error) {
				d, err := creds().CreateProfile(ctx, tx, p, in.ID, credential.CreateProfileInput{Provider: in.Body.Provider, Name: in.Body.Name})
				return credentialProfileView(d), err
			})
	})

	register(a, huma.Operation{
		OperationID: "list-credential-profiles", Method: http.MethodGet, Path: "/v1/workspaces/{id}/credential-profiles",
		Summary: "List a workspace's credential profiles, newest first", Tags: tags,
	}, operationOptions{}, func(ctx context.Context, in *credentialListInput) (*Listed[CredentialProfileView], error) {
		return listOf(ctx, a, credentialProfileList, in.ID, in.ListParams, func(p access.Principal, page cursor.Page) ([]CredentialProfileView, error) {
			rows, err := creds().ListProfiles(ctx, p, in.ID, page)
			return mapSlice(rows, credentialProfileView), err
		}, func(v CredentialProfileView) cursor.Position {
			return cursor.Position{CreatedAt: v.CreatedAt, ID: v.ID}
		})
	})

	register(a, huma.Operation{
		OperationID: "get-credential-profile", Method: http.MethodGet, Path: "/v1/credential-profiles/{id}",
		Summary: "Read a credential profile", Tags: tags,
	}, operationOptions{}, func(ctx context.Context, in *IDPath) (*Single[CredentialProfileView], error) {
		return single(ctx, a, func(p access.Principal) (CredentialProfileView, error) {
			d, err := creds().GetProfile(ctx, p, in.ID)
			return credentialProfileView(d), err
		})
	})

	register(a, huma.Operation{
		OperationID: "create-credential-profile-version", Method: http.MethodPost, Path: "/v1/credential-profiles/{id}/versions",
		Summary: "Write an immutable version of a credential profile", Tags: tags, DefaultStatus: http.StatusCreated,
		Description: "Needs credential:write. A generic secret's map is checked (a NUL in a value is 400 CREDENTIAL_SECRET_VALUE_INVALID) " +
			"and sealed before it is stored, and never returned: the answer carries its names only. Without a usable " +
			"IDEMPOTENCY_HMAC_KEY or CAIRN_MASTER_KEY a generic secret is refused with 503 and nothing is stored. " +
			"The version serves runs once verified.",
	}, operationOptions{mutation: true, admit: admitCredentialProfile, bodyLimit: credential.DocumentLimit,
		// The body is refused before anything is sealed; a NUL in a
		// secret's value has its own code (SPEC §7).
		nulProblem: &httpx.Problem{Status: http.StatusBadRequest, Code: "CREDENTIAL_SECRET_VALUE_INVALID"}},
		func(ctx context.Context, in *createCredentialVersionInput) (*Mutated[CredentialVersionView], error) {
			p, err := access.PrincipalFrom(ctx)
			if err != nil {
				return nil, a.fail(ctx, err)
			}
			// Everything that needs no lock is refused before the
			// transaction; the request's fingerprint holds a generic
			// map only as its keyed digest.
			pv, err := creds().PrepareVersion(ctx, p, in.ID, credential.VersionInput{Audience: in.Body.Audience,
				Phase: in.Body.Phase, Configuration: in.Body.Configuration})
			if err != nil {
				return nil, a.fail(ctx, err)
			}
			return mutation(ctx, a, in.IdempotencyKey, pv.IdempotencyInput(), http.StatusCreated,
				func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (CredentialVersionView, error) {
					v, err := creds().CreateVersion(ctx, tx, p, pv)
					return credentialVersionView(v), err
				})
		})

	register(a, huma.Operation{
		OperationID: "list-credential-profile-versions", Method: http.MethodGet, Path: "/v1/credential-profiles/{id}/versions",
		Summary: "List a credential profile's versions, newest first", Tags: tags,
	}, operationOptions{}, func(ctx context.Context, in *credentialListInput) (*Listed[CredentialVersionView], error) {
		return listOf(ctx, a, credentialVersionList, in.ID, in.ListParams, func(p access.Principal, page cursor.Page) ([]CredentialVersionView, error) {
			rows, err := creds().ListVersions(ctx, p, in.ID, page)
			return mapSlice(rows, credentialVersionView), err
		}, func(v CredentialVersionView) cursor.Position {
			return cursor.Position{CreatedAt: v.CreatedAt, ID: v.ID}
		})
	})

	register(a, huma.Operation{
		OperationID: "get-credential-profile-version", Method: http.MethodGet, Path: "/v1/credential-profiles/{id}/versions/{versionId}",
		Summary: "Read a credential profile version", Tags: tags,
		Description: "A version of another profile is 404, like a missing one.",
	}, operationOptions{}, func(ctx context.Context, in *CredentialVersionPath) (*Single[CredentialVersionView], error) {
		return single(ctx, a, func(p access.Principal) (CredentialVersionView, error) {
			v, err := creds().GetVersion(ctx, p, in.ID, in.VersionID)
			return credentialVersionView(v), err
		})
	})

	register(a, huma.Operation{
		OperationID: "verify-credential-profile-version", Method: http.MethodPost,
		Path:    "/v1/credential-profiles/{id}/versions/{versionId}/actions/verify",
		Summary: "Verify a version and make it current", Tags: tags,
		Description: "The broker opens and validates the stored envelope (a generic map) or configuration (a federation, which " +
			"also needs a signing key); the version then becomes current and runs created from now on pin it. Needs credential:write.",
	}, operationOptions{mutation: true, admit: admitCredentialProfile, bodyLimit: credential.DocumentLimit}, func(ctx context.Context, in *credentialVersionActionInput) (*Mutated[CredentialProfileView], error) {
		return mutation(ctx, a, in.IdempotencyKey, struct{}{}, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (CredentialProfileView, error) {
				d, _, err := creds().Verify(ctx, tx, p, in.ID, in.VersionID)
				return credentialProfileView(d), err
			})
	})

	register(a, huma.Operation{
		OperationID: "archive-credential-profile", Method: http.MethodPost, Path: "/v1/credential-profiles/{id}/actions/archive",
		Summary: "Archive a credential profile", Tags: tags,
		Description: "Exact empty object. Runs created from now on leave the profile out; queued runs that pinned it cannot redeem it " +
			"and end plan_credentials_required. Archiving twice is 409 CREDENTIAL_PROFILE_ARCHIVED. Needs credential:write.",
	}, operationOptions{mutation: true, admit: admitCredentialProfile, bodyLimit: credential.DocumentLimit}, func(ctx context.Context, in *credentialProfileActionInput) (*Mutated[CredentialProfileView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (CredentialProfileView, error) {
				d, err := creds().Archive(ctx, tx, p, in.ID)
				return credentialProfileView(d), err
			})
	})

	register(a, huma.Operation{
		OperationID: "revoke-credential-profile-version", Method: http.MethodPost,
		Path:    "/v1/credential-profiles/{id}/versions/{versionId}/actions/revoke",
		Summary: "Revoke a credential profile version", Tags: tags,
		Description: "Exact empty object. The version is never issued again; a run that pinned it ends plan_credentials_required. " +
			"Revoking twice is 409 CREDENTIAL_PROFILE_VERSION_DISABLED. Needs credential:write.",
	}, operationOptions{mutation: true, admit: admitCredentialProfile, bodyLimit: credential.DocumentLimit}, func(ctx context.Context, in *credentialVersionRevokeInput) (*Mutated[CredentialVersionView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (CredentialVersionView, error) {
				_, v, err := creds().Revoke(ctx, tx, p, in.ID, in.VersionID)
				return credentialVersionView(v), err
			})
	})
}
