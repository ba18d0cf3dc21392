package v1

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/idempotency"
	"github.com/cairnhq/cairn/api/platform/reqid"
	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/api/policy/rego"
	"github.com/cairnhq/cairn/api/run"
)

// PolicySourceUploadLimit is the exact policy source archive limit (SPEC §8).
const PolicySourceUploadLimit = policy.MaxSourceBytes

// PolicySetView is a policy set.
type PolicySetView struct {
	ID            string    `json:"id" doc:"Policy set ID (pol_…)."`
	Object        string    `json:"object" enum:"policy_set"`
	Name          string    `json:"name"`
	Description   string    `json:"description"`
	LatestVersion int       `json:"latest_version" doc:"Number of the newest version, 0 before the first upload."`
	CreatedAt     time.Time `json:"created_at"`
}

func policySetView(s policy.Set) PolicySetView {
	return PolicySetView{ID: s.ID, Object: "policy_set", Name: s.Name, Description: s.Description, LatestVersion: s.LatestVersion,
		CreatedAt: s.CreatedAt}
}

// CapabilitiesView names the Rego capabilities manifest a version was
// built and is evaluated under.
type CapabilitiesView struct {
	ID     string `json:"id"`
	SHA256 string `json:"sha256"`
}

// PolicyVersionView is one numbered, immutable version of a set.
type PolicyVersionView struct {
	ID                string           `json:"id" doc:"Policy version ID (pol_…)."`
	Object            string           `json:"object" enum:"policy_version"`
	PolicySetID       string           `json:"policy_set_id"`
	Number            int              `json:"number"`
	Status            string           `json:"status" enum:"pending,published,failed"`
	FailureCode       *string          `json:"failure_code" doc:"Safe code of a failed build: policy_compile_failed, policy_tests_failed, policy_bundle_failed, policy_output_bound_exceeded, policy_toolchain_unavailable, policy_orchestration_failed or policy_build_limit_exceeded."`
	WorkspaceID       string           `json:"workspace_id" doc:"The workspace whose settings the build used."`
	SettingsVersion   int              `json:"settings_version"`
	ToolVersion       string           `json:"tool_version"`
	Region            string           `json:"region"`
	SourceArtifactID  string           `json:"source_artifact_id" doc:"The committed source archive, which trusted clients may build again."`
	SourceSHA256      string           `json:"source_sha256"`
	SourceSizeBytes   int64            `json:"source_size_bytes"`
	BundleSHA256      *string          `json:"bundle_sha256"`
	TestResultsSHA256 *string          `json:"test_results_sha256"`
	TestsPassed       *int             `json:"tests_passed"`
	EngineVersion     string           `json:"engine_version"`
	Capabilities      CapabilitiesView `json:"capabilities"`
	Entrypoint        string           `json:"entrypoint"`
	CreatedAt         time.Time        `json:"created_at"`
	FinishedAt        *time.Time       `json:"finished_at"`
}

func policyVersionView(v policy.Version) PolicyVersionView {
	return PolicyVersionView{ID: v.ID, Object: "policy_version", PolicySetID: v.PolicySetID, Number: v.Number, Status: v.Status,
		FailureCode: v.FailureCode, WorkspaceID: v.WorkspaceID, SettingsVersion: v.SettingsVersion, ToolVersion: v.ToolVersion,
		Region: v.Region, SourceArtifactID: v.SourceArtifactID, SourceSHA256: run.HexDigest(v.SourceSHA256), SourceSizeBytes: v.SourceSize,
		BundleSHA256: hexOrNil(v.BundleSHA256), TestResultsSHA256: hexOrNil(v.TestResultsSHA256), TestsPassed: v.TestsPassed,
		EngineVersion: v.EngineVersion, Capabilities: CapabilitiesView{ID: v.CapabilitiesID, SHA256: v.CapabilitiesSHA256},
		Entrypoint: v.Entrypoint, CreatedAt: v.CreatedAt, FinishedAt: v.FinishedAt}
}

// PolicyAttachmentView is an attachment of a published version at a scope.
type PolicyAttachmentView struct {
	ID              string     `json:"id" doc:"Attachment ID (pol_…)."`
	Object          string     `json:"object" enum:"policy_attachment"`
	PolicySetID     string     `json:"policy_set_id"`
	PolicySetName   string     `json:"policy_set_name,omitempty"`
	PolicyVersionID string     `json:"policy_version_id"`
	VersionNumber   int        `json:"version_number,omitempty"`
	Scope           string     `json:"scope" enum:"organization,project,workspace"`
	ScopeID         string     `json:"scope_id"`
	EnforcementMode string     `json:"enforcement_mode" enum:"advisory,soft_mandatory,hard_mandatory"`
	Status          string     `json:"status" enum:"active,detached"`
	CreatedAt       time.Time  `json:"created_at"`
	DetachedAt      *time.Time `json:"detached_at"`
}

func policyAttachmentView(a policy.Attachment) PolicyAttachmentView {
	return PolicyAttachmentView{ID: a.ID, Object: "policy_attachment", PolicySetID: a.PolicySetID, PolicyVersionID: a.PolicyVersionID,
		Scope: a.Scope, ScopeID: a.ScopeID, EnforcementMode: a.EnforcementMode, Status: a.Status, CreatedAt: a.CreatedAt,
		DetachedAt: a.DetachedAt}
}

// FindingView is a policy finding as clients see it: arbitrary details are
// never shown.
type FindingView = policy.PublicFinding

// PolicyResultView is one attachment's persisted evaluation.
type PolicyResultView struct {
	ID              string        `json:"id"`
	Sequence        int           `json:"sequence"`
	AttachmentID    string        `json:"attachment_id"`
	PolicySetID     string        `json:"policy_set_id"`
	PolicySetName   string        `json:"policy_set_name"`
	PolicyVersionID string        `json:"policy_version_id"`
	VersionNumber   int           `json:"version_number"`
	Scope           string        `json:"scope" enum:"organization,project,workspace"`
	EnforcementMode string        `json:"enforcement_mode" enum:"advisory,soft_mandatory,hard_mandatory"`
	Status          string        `json:"status" enum:"passed,failed,error"`
	ErrorCode       *string       `json:"error_code" doc:"Safe code of an evaluation error; an error blocks apply."`
	InputDigest     *string       `json:"input_digest"`
	ResultDigest    string        `json:"result_digest" doc:"The digest an override names."`
	Overridable     bool          `json:"overridable" doc:"A soft_mandatory failure, which an override can waive."`
	Findings        []FindingView `json:"findings"`
}

// PolicyOverrideView is an immutable soft override.
type PolicyOverrideView struct {
	ID                 string    `json:"id"`
	PolicyResultID     string    `json:"policy_result_id"`
	PolicyVersionID    string    `json:"policy_version_id"`
	PolicyResultDigest string    `json:"policy_result_digest"`
	Justification      string    `json:"justification"`
	ExpiresAt          time.Time `json:"expires_at"`
	Expired            bool      `json:"expired"`
	ActorKind          string    `json:"actor_kind"`
	ActorID            string    `json:"actor_id"`
	RequestID          string    `json:"request_id"`
	CreatedAt          time.Time `json:"created_at"`
}

// PolicyGateView is whether the policy gate lets the run be approved.
type PolicyGateView struct {
	Open  bool       `json:"open"`
	Until *time.Time `json:"until" doc:"When overrides stop opening the gate; null when closed or when no override is needed."`
}

// RunPolicyView is a run's persisted, sanitized policy evidence.
type RunPolicyView struct {
	ID                 string               `json:"id" doc:"The run ID: a run has one policy evidence."`
	RunID              string               `json:"run_id"`
	Object             string               `json:"object" enum:"run_policy"`
	CheckID            *string              `json:"check_id" doc:"Null until the plan commits, which reserves the check pending."`
	Status             string               `json:"status" enum:"pending,passed,soft_failed,hard_failed,errored,overridden"`
	Incomplete         *string              `json:"incomplete" doc:"Set when the run ended before its evaluation was recorded: the check reports errored and the run can never apply."`
	Outcome            *string              `json:"outcome" enum:"pass,advisory_failed,soft_failed,hard_failed,error"`
	ConfigurationError *string              `json:"configuration_error" doc:"Why the run's attachment list could not be evaluated, e.g. a set attached at two scopes."`
	PlanDigest         *string              `json:"plan_digest"`
	InputDigest        *string              `json:"input_digest"`
	CompositionDigest  *string              `json:"composition_digest"`
	EngineVersion      string               `json:"engine_version"`
	Capabilities       CapabilitiesView     `json:"capabilities"`
	Entrypoint         string               `json:"entrypoint"`
	EvaluatedAt        *time.Time           `json:"evaluated_at"`
	DurationMS         *int                 `json:"duration_ms"`
	Gate               PolicyGateView       `json:"gate"`
	Results            []PolicyResultView   `json:"results"`
	Overrides          []PolicyOverrideView `json:"overrides" doc:"Newest first, at most 256."`
	OverridesTruncated bool                 `json:"overrides_truncated"`
}

func runPolicyView(review run.PolicyReview, now time.Time) RunPolicyView {
	capabilities, _ := rego.CapabilitiesDigest()
	v := RunPolicyView{ID: review.Run.ID, RunID: review.Run.ID, Object: "run_policy", Status: "pending", EngineVersion: rego.EngineVersion,
		Capabilities: CapabilitiesView{ID: rego.CapabilitiesID, SHA256: capabilities}, Entrypoint: rego.Entrypoint,
		Results: []PolicyResultView{}, Overrides: []PolicyOverrideView{}, OverridesTruncated: review.OverridesTruncated}
	r := review.Run
	v.Gate.Open = r.GateOpen(now)
	if v.Gate.Open && r.PolicyGateUntil != nil && r.PolicyGateUntil.Before(policy.GateAlwaysOpen) {
		v.Gate.Until = r.PolicyGateUntil
	}
	v.Status = review.Status()
	c := review.Check
	if c == nil {
		return v
	}
	v.CheckID, v.PlanDigest = &c.ID, hexOrNil(c.PlanDigest)
	if review.Incomplete() {
		incomplete := run.PolicyIncomplete
		v.Incomplete = &incomplete
	}
	if !c.Completed() {
		return v
	}
	v.Outcome, v.ConfigurationError = &c.Outcome, c.ConfigurationError
	v.InputDigest, v.CompositionDigest = hexOrNil(c.InputDigest), hexOrNil(c.CompositionDigest)
	v.EvaluatedAt, v.DurationMS = c.EvaluatedAt, &c.DurationMS
	for _, res := range review.Results {
		name := review.Names[res.PolicyVersionID]
		v.Results = append(v.Results, PolicyResultView{ID: res.ID, Sequence: res.Sequence, AttachmentID: res.AttachmentID,
			PolicySetID: res.PolicySetID, PolicySetName: name.SetName, PolicyVersionID: res.PolicyVersionID, VersionNumber: name.Number,
			Scope: res.Scope, EnforcementMode: res.EnforcementMode, Status: res.Status, ErrorCode: res.ErrorCode,
			InputDigest: hexOrNil(res.InputDigest), ResultDigest: run.HexDigest(res.ResultDigest), Overridable: res.Overridable(),
			Findings: policy.PublicFindings(res.Findings)})
	}
	for _, o := range review.Overrides {
		v.Overrides = append(v.Overrides, PolicyOverrideView{ID: o.ID, PolicyResultID: o.PolicyResultID, PolicyVersionID: o.PolicyVersionID,
			PolicyResultDigest: run.HexDigest(o.PolicyResultDigest), Justification: o.Justification, ExpiresAt: o.ExpiresAt,
			Expired: !o.ExpiresAt.After(now), ActorKind: o.ActorKind, ActorID: o.ActorID, RequestID: o.RequestID, CreatedAt: o.CreatedAt})
	}
	return v
}

type createPolicySetInput struct {
	IdempotencyHeader
	Body struct {
		Name        string `json:"name" minLength:"1" maxLength:"100" doc:"Letters, digits, '.', '_' or '-', unique in the organization."`
		Description string `json:"description,omitempty" maxLength:"2000"`
	}
}

type uploadPolicyVersionInput struct {
	IdempotencyHeader
	IDPath
	SetID string `path:"setId" maxLength:"64"`
}

// AttachRequest attaches a published version.
type AttachRequest struct {
	PolicySetID     string `json:"policy_set_id,omitempty" maxLength:"64"`
	PolicyVersionID string `json:"policy_version_id" maxLength:"64"`
	EnforcementMode string `json:"enforcement_mode" enum:"advisory,soft_mandatory,hard_mandatory"`
}

type attachWorkspaceInput struct {
	IdempotencyHeader
	IDPath
	Body AttachRequest
}

type rebuildInput struct {
	IdempotencyHeader
	IDPath
	Body struct {
		WorkspaceID      string `json:"workspace_id" maxLength:"64" doc:"The workspace whose current settings the build pins."`
		SourceArtifactID string `json:"source_artifact_id" maxLength:"64" doc:"A committed source artifact of this set (pol_…)."`
		SourceSHA256     string `json:"source_sha256" pattern:"^[0-9a-f]{64}$" doc:"Its committed SHA-256."`
	}
}

type attachScopeInput struct {
	IdempotencyHeader
	IDPath
	Body struct {
		PolicyVersionID string `json:"policy_version_id" maxLength:"64"`
		EnforcementMode string `json:"enforcement_mode" enum:"advisory,soft_mandatory,hard_mandatory"`
		Scope           string `json:"scope" enum:"organization,project,workspace"`
		ScopeID         string `json:"scope_id,omitempty" maxLength:"64" doc:"Project or workspace ID; omitted for the organization scope."`
	}
}

type detachScopeInput struct {
	IdempotencyHeader
	IDPath
	AttachmentID string `path:"attachmentId" maxLength:"64"`
}

type detachInput struct {
	IdempotencyHeader
	IDPath
	AttachmentID string `path:"attachmentId" maxLength:"64"`
}

// OverrideRequest waives one soft-failed policy result of a run.
type OverrideRequest struct {
	PolicyResultDigest string    `json:"policy_result_digest" pattern:"^[0-9a-f]{64}$"`
	Justification      string    `json:"justification" doc:"1–2,000 characters after trimming surrounding white space."`
	ExpiresAt          time.Time `json:"expires_at" doc:"ISO 8601 UTC, in the future and at most 24 hours ahead."`
}

type overrideInput struct {
	IdempotencyHeader
	IDPath
	Body OverrideRequest
}

// PolicyOverrideResult is an override with the run it changed.
type PolicyOverrideResult struct {
	ID       string             `json:"id" doc:"The override ID, as override.id."`
	Object   string             `json:"object" enum:"policy_override_result"`
	Override PolicyOverrideView `json:"override"`
	Policy   RunPolicyView      `json:"policy"`
}

func (a *API) registerPolicies() {
	tags := []string{"Policy"}
	policies := func() *policy.Service { return a.deps.Services.Policies }

	register(a, huma.Operation{
		OperationID: "create-policy-set", Method: http.MethodPost, Path: "/v1/policy-sets",
		Summary: "Create a policy set", Tags: tags, DefaultStatus: http.StatusCreated,
	}, operationOptions{mutation: true, admit: admitOrganization}, func(ctx context.Context, in *createPolicySetInput) (*Mutated[PolicySetView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusCreated,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (PolicySetView, error) {
				s, err := policies().CreateSet(ctx, tx, p, policy.SetInput{Name: in.Body.Name, Description: in.Body.Description})
				return policySetView(s), err
			})
	})

	register(a, huma.Operation{
		OperationID: "list-policy-sets", Method: http.MethodGet, Path: "/v1/policy-sets",
		Summary: "List the organization's policy sets by name", Tags: tags,
	}, operationOptions{}, func(ctx context.Context, _ *struct{}) (*Listed[PolicySetView], error) {
		return whole(ctx, a, func(p access.Principal) ([]PolicySetView, error) {
			sets, err := policies().ListSets(ctx, p)
			return mapSlice(sets, policySetView), err
		})
	})

	register(a, huma.Operation{
		OperationID: "get-policy-set", Method: http.MethodGet, Path: "/v1/policy-sets/{id}",
		Summary: "Read a policy set", Tags: tags,
	}, operationOptions{}, func(ctx context.Context, in *IDPath) (*Single[PolicySetView], error) {
		return single(ctx, a, func(p access.Principal) (PolicySetView, error) {
			s, err := policies().GetSet(ctx, p, in.ID)
			return policySetView(s), err
		})
	})

	register(a, huma.Operation{
		OperationID: "list-policy-versions", Method: http.MethodGet, Path: "/v1/policy-sets/{id}/versions",
		Summary: "List a set's versions, newest first (at most 100)", Tags: tags,
	}, operationOptions{}, func(ctx context.Context, in *IDPath) (*Listed[PolicyVersionView], error) {
		return whole(ctx, a, func(p access.Principal) ([]PolicyVersionView, error) {
			versions, err := policies().ListVersions(ctx, p, in.ID)
			return mapSlice(versions, policyVersionView), err
		})
	})

	register(a, huma.Operation{
		OperationID: "get-policy-version", Method: http.MethodGet, Path: "/v1/policy-versions/{id}",
		Summary: "Read a policy version and its build status", Tags: tags,
	}, operationOptions{}, func(ctx context.Context, in *IDPath) (*Single[PolicyVersionView], error) {
		return single(ctx, a, func(p access.Principal) (PolicyVersionView, error) {
			v, err := policies().GetVersion(ctx, p, in.ID)
			return policyVersionView(v), err
		})
	})

	register(a, huma.Operation{
		OperationID: "upload-policy-version", Method: http.MethodPost, Path: "/v1/workspaces/{id}/policy-sets/{setId}/versions",
		Summary: "Upload Rego sources and tests as a new pending version", Tags: tags, DefaultStatus: http.StatusAccepted,
		Description: "The body is a .tar.gz of .rego sources and *_test.rego tests (Content-Type: application/gzip), at most " +
			"100,000,000 bytes, streamed into sealed storage while it is validated. The version pins the workspace's settings " +
			"version and is built in a sandbox: strict Rego v1 compilation under the cairn-rego-capabilities-v1 manifest, the " +
			"entrypoint data.cairn.v1.decision, the set's tests, and a bundle. Poll the version until it is published or failed.",
		RequestBody: &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{
			"application/gzip": {Schema: &huma.Schema{Type: "string", Format: "binary"}},
		}},
	}, operationOptions{mutation: true, admit: admitWorkspace, bodyLimit: PolicySourceUploadLimit}, func(ctx context.Context, in *uploadPolicyVersionInput) (*Mutated[PolicyVersionView], error) {
		return a.uploadPolicyVersion(ctx, in)
	})

	register(a, huma.Operation{
		OperationID: "rebuild-policy-version", Method: http.MethodPost, Path: "/v1/policy-sets/{id}/versions",
		Summary: "Build a committed source artifact again as a new pending version", Tags: tags, DefaultStatus: http.StatusAccepted,
		Description: "For trusted clients (workspace:admin): the body names a source artifact already committed for this set and its " +
			"SHA-256; a different digest is 409 POLICY_SOURCE_MISMATCH. The new version pins the named workspace's current settings. " +
			"Clients can never supply a status, bundle, test result, engine, capabilities or entrypoint.",
	}, operationOptions{mutation: true, admit: admitInHandler}, func(ctx context.Context, in *rebuildInput) (*Mutated[PolicyVersionView], error) {
		if err := a.admitBody(ctx, func(p access.Principal) error { return a.admitWorkspaceID(ctx, p, in.Body.WorkspaceID) }); err != nil {
			return nil, err
		}
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusAccepted,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (PolicyVersionView, error) {
				v, err := policies().RebuildVersion(ctx, tx, p, in.ID, policy.RebuildInput{WorkspaceID: in.Body.WorkspaceID,
					SourceArtifactID: in.Body.SourceArtifactID, SourceSHA256: in.Body.SourceSHA256})
				return policyVersionView(v), err
			})
	})

	register(a, huma.Operation{
		OperationID: "attach-policy-set", Method: http.MethodPost, Path: "/v1/policy-sets/{id}/attachments",
		Summary: "Attach a published version at organization, project or workspace scope", Tags: tags, DefaultStatus: http.StatusCreated,
		Description: "Organization and project scopes need workspace:admin. A set may be in force once in a workspace's ancestry; " +
			"attaching it at two applicable scopes makes every later run of that workspace fail its policy stage closed.",
	}, operationOptions{mutation: true, admit: admitInHandler}, func(ctx context.Context, in *attachScopeInput) (*Mutated[PolicyAttachmentView], error) {
		if err := a.admitBody(ctx, func(p access.Principal) error {
			return a.admitPolicyScope(ctx, p, in.Body.Scope, in.Body.ScopeID)
		}); err != nil {
			return nil, err
		}
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusCreated,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (PolicyAttachmentView, error) {
				att, err := policies().Attach(ctx, tx, p, policy.AttachInput{PolicySetID: in.ID, PolicyVersionID: in.Body.PolicyVersionID,
					EnforcementMode: in.Body.EnforcementMode, Scope: in.Body.Scope, ScopeID: in.Body.ScopeID})
				return policyAttachmentView(att), err
			})
	})

	register(a, huma.Operation{
		OperationID: "detach-policy-set", Method: http.MethodDelete, Path: "/v1/policy-sets/{id}/attachments/{attachmentId}",
		Summary: "Detach an attachment of the set at any scope", Tags: tags,
		Description: "The same checks as attaching at that scope. Compare-and-set on the active attachment; only runs created afterwards are affected.",
	}, operationOptions{mutation: true, admit: admitInHandler}, func(ctx context.Context, in *detachScopeInput) (*Mutated[PolicyAttachmentView], error) {
		if err := a.admitBody(ctx, func(p access.Principal) error { return a.admitAttachment(ctx, p, in.ID, in.AttachmentID) }); err != nil {
			return nil, err
		}
		return mutation(ctx, a, in.IdempotencyKey, struct{}{}, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (PolicyAttachmentView, error) {
				att, err := policies().Detach(ctx, tx, p, in.ID, in.AttachmentID)
				return policyAttachmentView(att), err
			})
	})

	register(a, huma.Operation{
		OperationID: "list-workspace-policy-attachments", Method: http.MethodGet, Path: "/v1/workspaces/{id}/policy-attachments",
		Summary: "List the attachments in force for a workspace", Tags: tags,
		Description: "Active attachments of the workspace's organization, project and the workspace itself, in evaluation order.",
	}, operationOptions{}, func(ctx context.Context, in *IDPath) (*Listed[PolicyAttachmentView], error) {
		return whole(ctx, a, func(p access.Principal) ([]PolicyAttachmentView, error) {
			rows, err := policies().WorkspaceAttachments(ctx, p, in.ID)
			return mapSlice(rows, func(e policy.EffectiveAttachment) PolicyAttachmentView {
				v := policyAttachmentView(e.Attachment)
				v.PolicySetName, v.VersionNumber = e.PolicySetName, e.VersionNumber
				return v
			}), err
		})
	})

	register(a, huma.Operation{
		OperationID: "attach-workspace-policy", Method: http.MethodPost, Path: "/v1/workspaces/{id}/policy-attachments",
		Summary: "Attach a published version to the workspace", Tags: tags, DefaultStatus: http.StatusCreated,
		Description: "Only published versions can be attached. Runs created afterwards snapshot the attachment; existing runs keep theirs.",
	}, operationOptions{mutation: true, admit: admitWorkspace}, func(ctx context.Context, in *attachWorkspaceInput) (*Mutated[PolicyAttachmentView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusCreated,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (PolicyAttachmentView, error) {
				att, err := policies().AttachToWorkspace(ctx, tx, p, in.ID, policy.AttachInput{PolicySetID: in.Body.PolicySetID,
					PolicyVersionID: in.Body.PolicyVersionID, EnforcementMode: in.Body.EnforcementMode})
				return policyAttachmentView(att), err
			})
	})

	register(a, huma.Operation{
		OperationID: "detach-workspace-policy", Method: http.MethodDelete, Path: "/v1/workspaces/{id}/policy-attachments/{attachmentId}",
		Summary: "Detach a workspace attachment", Tags: tags,
		Description: "Compare-and-set on the active attachment; a detached one is refused with 409. Only runs created afterwards are affected.",
	}, operationOptions{mutation: true, admit: admitWorkspace}, func(ctx context.Context, in *detachInput) (*Mutated[PolicyAttachmentView], error) {
		return mutation(ctx, a, in.IdempotencyKey, struct{}{}, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (PolicyAttachmentView, error) {
				att, err := policies().DetachFromWorkspace(ctx, tx, p, in.ID, in.AttachmentID)
				return policyAttachmentView(att), err
			})
	})

	register(a, huma.Operation{
		OperationID: "get-run-policy", Method: http.MethodGet, Path: "/v1/runs/{id}/policy",
		Summary: "Read a run's persisted, sanitized policy evidence", Tags: tags,
		Description: "Results per snapshotted attachment with findings (title, message, resource address; details are never shown), " +
			"digests, the gate, and at most 256 overrides with a truncation flag.",
	}, operationOptions{}, func(ctx context.Context, in *IDPath) (*Single[RunPolicyView], error) {
		return single(ctx, a, func(p access.Principal) (RunPolicyView, error) {
			review, err := a.deps.Services.Runs.Policy(ctx, p, in.ID)
			return runPolicyView(review, time.Now()), err
		})
	})

	register(a, huma.Operation{
		OperationID: "override-run-policy", Method: http.MethodPost, Path: "/v1/runs/{id}/policy-overrides",
		Summary: "Override one soft-failed policy result", Tags: tags, DefaultStatus: http.StatusCreated,
		Description: "Needs policy:override_soft. The override is immutable and bound to the run, its plan digest, the result's policy " +
			"version and result digest; a digest that is not a current soft failure is refused with 409 POLICY_RESULT_STALE. " +
			"When every current soft failure has an unexpired override, the gate opens until the first of them expires.",
	}, operationOptions{mutation: true, admit: admitRun}, func(ctx context.Context, in *overrideInput) (*Mutated[PolicyOverrideResult], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusCreated,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (PolicyOverrideResult, error) {
				runs := a.deps.Services.Runs
				o, _, err := runs.OverridePolicy(ctx, tx, p, in.ID, run.OverrideInput{PolicyResultDigest: in.Body.PolicyResultDigest,
					Justification: in.Body.Justification, ExpiresAt: in.Body.ExpiresAt, RequestID: reqid.From(ctx)})
				if err != nil {
					return PolicyOverrideResult{}, err
				}
				review, err := runs.PolicyInTx(ctx, tx, p, in.ID)
				if err != nil {
					return PolicyOverrideResult{}, err
				}
				now := time.Now()
				return PolicyOverrideResult{ID: o.ID, Object: "policy_override_result",
					Override: PolicyOverrideView{ID: o.ID, PolicyResultID: o.PolicyResultID, PolicyVersionID: o.PolicyVersionID,
						PolicyResultDigest: run.HexDigest(o.PolicyResultDigest), Justification: o.Justification, ExpiresAt: o.ExpiresAt,
						ActorKind: o.ActorKind, ActorID: o.ActorID, RequestID: o.RequestID, CreatedAt: o.CreatedAt},
					Policy: runPolicyView(review, now),
				}, nil
			})
	})
}

// uploadPolicyVersion streams the source archive in before the idempotent
// transaction, like configuration uploads: validated and sealed first,
// then the pending row, audit evidence, dispatch record and build job
// commit together. A replay returns the first answer without
// redispatching and drops the duplicate bytes.
func (a *API) uploadPolicyVersion(ctx context.Context, in *uploadPolicyVersionInput) (*Mutated[PolicyVersionView], error) {
	p, err := access.PrincipalFrom(ctx)
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	// The key names the source object, so it is checked before any byte
	// is read.
	if err := idempotency.ValidateKey(in.IdempotencyKey); err != nil {
		return nil, a.fail(ctx, err)
	}
	policies := a.deps.Services.Policies
	if err := policies.ReadyToUpload(ctx, p, in.ID, in.SetID); err != nil {
		return nil, a.fail(ctx, err)
	}
	body, _ := ctx.Value(bodyStreamKey{}).(io.Reader)
	if body == nil {
		return nil, a.fail(ctx, policy.SourceError{Code: "archive_empty"})
	}
	staged, err := policies.StageSource(ctx, p, in.ID, in.SetID, in.IdempotencyKey, body)
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	input := map[string]any{"workspace_id": in.ID, "policy_set_id": in.SetID, "source_identity": staged.Identity,
		"sha256": run.HexDigest(staged.Digests.SHA256), "size_bytes": staged.Digests.Size}
	out, err := mutation(ctx, a, in.IdempotencyKey, input, http.StatusAccepted,
		func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (PolicyVersionView, error) {
			v, err := policies.CreateVersion(ctx, tx, p, staged)
			return policyVersionView(v), err
		})
	if err != nil || out.Replayed == "true" {
		policies.DiscardStaged(ctx, staged)
	}
	return out, err
}
