package v1

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/jmoiron/sqlx"
	"golang.org/x/sync/errgroup"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/plandiff"
	"github.com/cairnhq/cairn/api/platform/cursor"
	"github.com/cairnhq/cairn/api/platform/httpx"
	"github.com/cairnhq/cairn/api/run"
)

// ConfigurationUploadLimit is the exact archive limit (SPEC §8).
const ConfigurationUploadLimit = run.MaxArchiveBytes

// ConfigurationVersionView is an uploaded configuration archive's metadata.
type ConfigurationVersionView struct {
	ID             string     `json:"id" doc:"Configuration version ID (cfg_…)."`
	Object         string     `json:"object" enum:"configuration_version"`
	WorkspaceID    string     `json:"workspace_id"`
	Status         string     `json:"status" enum:"pending,uploaded,errored"`
	ErrorCode      *string    `json:"error_code" doc:"Why the archive was refused, when errored."`
	SHA256         *string    `json:"sha256" doc:"SHA-256 of the archive as uploaded."`
	LockFileSHA256 *string    `json:"lock_file_sha256" doc:"SHA-256 of the root .terraform.lock.hcl, null when the archive has none."`
	SizeBytes      *int64     `json:"size_bytes"`
	Entries        *int       `json:"entries"`
	Speculative    bool       `json:"speculative"`
	Source         string     `json:"source" enum:"api,tfe"`
	CreatedAt      time.Time  `json:"created_at"`
	UploadedAt     *time.Time `json:"uploaded_at"`
}

func configurationView(cv run.ConfigurationVersion) ConfigurationVersionView {
	return ConfigurationVersionView{ID: cv.ID, Object: "configuration_version", WorkspaceID: cv.WorkspaceID, Status: cv.Status,
		ErrorCode: cv.ErrorCode, SHA256: hexOrNil(cv.SHA256), LockFileSHA256: hexOrNil(cv.LockFileSHA256), SizeBytes: cv.SizeBytes,
		Entries: cv.Entries, Speculative: cv.Speculative, Source: cv.Source, CreatedAt: cv.CreatedAt, UploadedAt: cv.UploadedAt}
}

func hexOrNil(b []byte) *string {
	if len(b) == 0 {
		return nil
	}
	s := run.HexDigest(b)
	return &s
}

type uploadConfigurationInput struct {
	IdempotencyHeader
	IDPath
}

// CreateRunRequest is the body of POST /v1/runs.
type CreateRunRequest struct {
	WorkspaceID            string  `json:"workspace_id" maxLength:"64"`
	ConfigurationVersionID string  `json:"configuration_version_id,omitempty" maxLength:"64" doc:"Omitted: the workspace's current configuration version (the newest upload a run may use)."`
	Kind                   string  `json:"kind" enum:"plan_and_apply,plan_only,speculative"`
	Message                string  `json:"message,omitempty" maxLength:"2000"`
	AutoApply              Refused `json:"auto_apply,omitzero" doc:"Refused whatever its value, null included (400 RUN_AUTO_APPLY_UNSUPPORTED): Cairn never applies without an approval."`
	IsDestroy              Refused `json:"is_destroy,omitzero" doc:"Refused whatever its value, null included (400 RUN_DESTROY_UNSUPPORTED): destroy-mode runs are not supported."`
	RunOptionsBody
}

// Refused is a request field refused whatever it holds: its schema admits
// no value, so the key alone fails validation before anything is read or
// persisted, and a decoder that skipped the schema would still see it sent.
type Refused struct{ sent bool }

// Schema admits nothing: every value, null included, fails "not {}".
func (Refused) Schema(huma.Registry) *huma.Schema { return &huma.Schema{Not: &huma.Schema{}} }

// UnmarshalJSON is called for any value, null included, so the key alone
// marks the field sent.
func (f *Refused) UnmarshalJSON([]byte) error {
	f.sent = true
	return nil
}

// Sent reports whether the request carried the field at all.
func (f Refused) Sent() bool { return f.sent }

// IsZero lets an unsent field stay out of a request's fingerprint.
func (f Refused) IsZero() bool { return !f.sent }

// RunOptionsBody are a new run's own options. Each refused option answers
// 400 with the code RUN_<OPTION>_INVALID (RUN_TOOL_VERSION_PLAN_ONLY and
// RUN_TOOL_VERSION_UNSUPPORTED for tool_version) and persists nothing.
type RunOptionsBody struct {
	TargetAddrs  []string `json:"target_addrs,omitempty" doc:"Plan only these resources and what they depend on (tofu plan -target): at most 100 resource addresses such as terraform_data.a or module.m.aws_instance.b[\"k\"], each at most 1,024 bytes."`
	ReplaceAddrs []string `json:"replace_addrs,omitempty" doc:"Plan to replace these resources (tofu plan -replace): at most 100 resource addresses, each at most 1,024 bytes."`
	Refresh      *bool    `json:"refresh,omitempty" doc:"Default true; false plans without refreshing the state first (-refresh=false)."`
	RefreshOnly  bool     `json:"refresh_only,omitempty" doc:"Plan only to update the state to match the real infrastructure (-refresh-only); its apply writes that state. Conflicts with refresh false and with replace_addrs."`
	// AllowEmptyApply and SavePlan need a plan_and_apply run.
	AllowEmptyApply bool              `json:"allow_empty_apply,omitempty" doc:"A plan without changes still goes on to policy, approval and an apply (which updates outputs). plan_and_apply only."`
	SavePlan        bool              `json:"save_plan,omitempty" doc:"A saved plan: it plans at once without holding the workspace queue or lock and waits for an approval, which joins the queue only when no other run holds it and fails if the state moved since the plan. plan_and_apply only."`
	Variables       []RunVariableBody `json:"variables,omitempty" doc:"At most 100 run variables; each overrides the workspace variable (and any non-priority variable set value) of the same key for this run only; a priority variable set value wins over it. Not sensitive: the run shows them."`
	ToolVersion     string            `json:"tool_version,omitempty" maxLength:"64" doc:"A tool version the API offers (an OpenTofu version of CAIRN_TOOL_VERSIONS, or terraform-<version> of CAIRN_TERRAFORM_VERSIONS) to plan with instead of the workspace's; plan_only and speculative runs only."`
}

// RunVariableBody is one run variable.
type RunVariableBody struct {
	Key   string `json:"key" doc:"A variable name: an identifier of at most 128 characters, given once."`
	Value string `json:"value" doc:"An HCL expression, at most 65,536 bytes: a string is written quoted, with its quotes as part of the value. It is checked when the plan writes it: one that is not a single expression fails the plan (variable_value_invalid)."`
}

// options are the run options the body asks for.
func (b RunOptionsBody) options() *run.RunOptions {
	o := run.DefaultRunOptions()
	if b.Refresh != nil {
		o.Refresh = *b.Refresh
	}
	o.TargetAddrs, o.ReplaceAddrs = b.TargetAddrs, b.ReplaceAddrs
	o.RefreshOnly, o.AllowEmptyApply, o.SavePlan = b.RefreshOnly, b.AllowEmptyApply, b.SavePlan
	for _, v := range b.Variables {
		o.Variables = append(o.Variables, run.RunVariable{Key: v.Key, Value: v.Value})
	}
	return &o
}

type createRunInput struct {
	IdempotencyHeader
	Body CreateRunRequest
}

// BindingBody is the exact review an approval or rejection names.
type BindingBody struct {
	PlanDigest                string  `json:"plan_digest" pattern:"^[0-9a-f]{64}$"`
	PolicyResultDigest        string  `json:"policy_result_digest" pattern:"^[0-9a-f]{64}$"`
	PredecessorStateVersionID *string `json:"predecessor_state_version_id" doc:"The state the plan was made against; null before the first state."`
	DependencyLockDigest      string  `json:"dependency_lock_digest" pattern:"^[0-9a-f]{64}$"`
}

type decideInput struct {
	IdempotencyHeader
	IDPath
	Body BindingBody
}

// RejectRequest is the reviewed binding plus the discard reason.
type RejectRequest struct {
	BindingBody
	Reason string `json:"reason,omitempty" maxLength:"2000" doc:"Why the run is discarded: trimmed, at most 500 characters; kept on the run and audited."`
}

type rejectInput struct {
	IdempotencyHeader
	IDPath
	Body RejectRequest
}

type cancelInput struct {
	IdempotencyHeader
	IDPath
}

type forceExecuteInput struct {
	IdempotencyHeader
	IDPath
}

type releaseInput struct {
	IdempotencyHeader
	IDPath
}

// RecoverRequest resolves a run whose apply outcome is uncertain.
type RecoverRequest struct {
	Resolution            string  `json:"resolution" enum:"current_state_verified,import_emergency_state"`
	CurrentStateVersionID *string `json:"current_state_version_id" doc:"The current state version the caller was shown (null if none)."`
	CurrentStateDigest    string  `json:"current_state_digest" doc:"SHA-256 of that state, as shown (empty when there is none)." maxLength:"64"`
	EmergencyStateDigest  string  `json:"emergency_state_digest,omitempty" maxLength:"64" doc:"SHA-256 of the emergency state to import."`
	Reason                string  `json:"reason" minLength:"1" maxLength:"500"`
	ConfirmFenceAdvance   bool    `json:"confirm_fence_advance" doc:"Must be true: the workspace's state fence moves past the uncertain apply."`
	ConfirmTakeover       bool    `json:"confirm_takeover,omitempty" doc:"True to take over a recovery whose lease expired."`
}

type recoverInput struct {
	IdempotencyHeader
	IDPath
	Body RecoverRequest
}

type runListInput struct {
	ListParams
	WorkspaceID string `query:"workspace_id" maxLength:"64" doc:"Only runs of this workspace."`
}

type logsInput struct {
	IDPath
	After int64  `query:"after" minimum:"0" doc:"Return chunks after this sequence."`
	Limit int    `query:"limit" minimum:"0" maximum:"100" doc:"At most this many chunks (1–100; default 100)."`
	Tail  int    `query:"tail" minimum:"0" maximum:"100" doc:"Return the newest n chunks in ascending order; excludes after and limit."`
	Phase string `query:"phase" enum:"plan,policy,apply" doc:"Only this phase's chunks (plan, policy or apply); with tail, that phase's newest n. Sequences stay the run's, so they skip the other phases' chunks."`
}

// RunListCursorMaxAge is how long a run-list cursor pages. Runs are
// created all the time, so a position from a day ago is not the page a
// client thinks it is continuing; it starts from the first page again.
const RunListCursorMaxAge = 24 * time.Hour

// LogsOutput carries the chunks and the newest returned sequence.
type LogsOutput struct {
	LastSequence string                           `header:"X-Cairn-Log-Last-Sequence" doc:"Sequence of the newest chunk returned."`
	Body         httpx.ListEnvelope[LogChunkView] `doc:"meta.page.next_cursor is always null: read on with after."`
}

// LogChunkView is one sanitized log chunk of a run.
type LogChunkView struct {
	ID     string `json:"id" doc:"The run ID and the chunk's sequence, run_…:sequence."`
	Object string `json:"object" enum:"log_chunk"`
	run.LogChunk
}

// PlanChangesView is the cairn.plan-diff/v1 artifact of a run.
type PlanChangesView struct {
	ID     string `json:"id" doc:"The run ID."`
	Object string `json:"object" enum:"plan_changes"`
	plandiff.Artifact
}

func (a *API) registerRuns() {
	tags := []string{"Runs"}
	register(a, huma.Operation{
		OperationID: "upload-configuration-version", Method: http.MethodPost, Path: "/v1/workspaces/{id}/configuration-versions",
		Summary: "Upload a configuration archive", Tags: tags, DefaultStatus: http.StatusCreated,
		Description: "The body is a .tar.gz of OpenTofu configuration (Content-Type: application/gzip), at most 100,000,000 bytes, " +
			"streamed into sealed storage while it is validated. Traversal, absolute and duplicate paths, links, unsupported entry types, " +
			"invalid checksums, excessive expansion, too many entries and over-long paths are refused with 422 and a CONFIGURATION_ARCHIVE_* code.",
		RequestBody: &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{
			"application/gzip": {Schema: &huma.Schema{Type: "string", Format: "binary"}},
		}},
	}, operationOptions{mutation: true, admit: admitWorkspace, bodyLimit: ConfigurationUploadLimit}, func(ctx context.Context, in *uploadConfigurationInput) (*Mutated[ConfigurationVersionView], error) {
		return a.uploadConfiguration(ctx, in)
	})

	register(a, huma.Operation{
		OperationID: "create-run", Method: http.MethodPost, Path: "/v1/runs",
		Summary: "Create a run", Tags: tags, DefaultStatus: http.StatusCreated,
		Description: "Creates a run of an uploaded configuration version. A body carrying auto_apply or is_destroy, whatever the value " +
			"(false and null included), is refused with 400 RUN_AUTO_APPLY_UNSUPPORTED or RUN_DESTROY_UNSUPPORTED and persists nothing. New-run admission " +
			"(the new-run switch, suspension, pinned region, ceilings and runner release) is checked in the creating transaction; a refusal " +
			"is the retryable 503 service_unavailable and persists nothing.",
	}, operationOptions{mutation: true, admit: admitInHandler, refusedFields: map[string]error{
		"auto_apply": run.ErrAutoApply, "is_destroy": run.ErrDestroy,
	}}, func(ctx context.Context, in *createRunInput) (*Mutated[RunView], error) {
		// The workspace named in the body is admitted before anything about
		// the run is looked at, so a closed gate answers an unknown or
		// unready run exactly like a refused one; the creating transaction
		// then checks the new-run rule.
		if err := a.admitBody(ctx, func(p access.Principal) error { return a.admitWorkspaceID(ctx, p, in.Body.WorkspaceID) }); err != nil {
			return nil, err
		}
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusCreated,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (RunView, error) {
				r, err := a.deps.Services.Runs.CreateRun(ctx, tx, p, run.CreateInput{
					WorkspaceID: in.Body.WorkspaceID, ConfigurationVersionID: in.Body.ConfigurationVersionID,
					Kind: run.Kind(in.Body.Kind), Message: in.Body.Message, Source: run.SourceAPI, LatestConfiguration: in.Body.ConfigurationVersionID == "",
					AutoApply: in.Body.AutoApply.Sent(), IsDestroy: in.Body.IsDestroy.Sent(),
					Options: in.Body.options(), ToolVersion: in.Body.ToolVersion,
				})
				if err != nil {
					return RunView{}, err
				}
				return a.runView(ctx, tx, p, r)
			})
	})

	runs := listSpec{endpoint: "runs", invalidCode: "RUN_LIST_CURSOR_INVALID", maxAge: RunListCursorMaxAge}
	register(a, huma.Operation{
		OperationID: "list-runs", Method: http.MethodGet, Path: "/v1/runs",
		Summary: "List the organization's runs, newest first", Tags: tags,
		Description: "A cursor pages this list (with the same workspace_id) for 24 hours after it was issued; a malformed, " +
			"over-sized, outdated, other list's, bare timestamp or delimiter cursor is refused with 400 RUN_LIST_CURSOR_INVALID.",
	}, operationOptions{}, func(ctx context.Context, in *runListInput) (*Listed[RunSummaryView], error) {
		return listOf(ctx, a, runs, in.WorkspaceID, in.ListParams,
			func(p access.Principal, page cursor.Page) ([]RunSummaryView, error) {
				rows, err := a.deps.Services.Runs.ListRuns(ctx, p, run.RunFilter{WorkspaceID: in.WorkspaceID}, page)
				if err != nil {
					return nil, err
				}
				// The page's workspace names are read beside its queues.
				var names map[string]string
				var queues map[string][]run.Run
				var g errgroup.Group
				g.Go(func() (err error) {
					names, err = a.deps.Services.Workspaces.Names(ctx, a.deps.DB, p.OrganizationID, workspaceIDs(rows))
					return err
				})
				g.Go(func() (err error) {
					queues, err = a.deps.Services.Runs.QueuesAhead(ctx, a.deps.DB, rows...)
					return err
				})
				if err := g.Wait(); err != nil {
					return nil, err
				}
				return mapSlice(rows, func(r run.Run) RunSummaryView { return runSummary(r, names[r.WorkspaceID], queues[r.ID], p) }), nil
			},
			func(r RunSummaryView) cursor.Position { return cursor.Position{CreatedAt: r.CreatedAt, ID: r.ID} })
	})

	register(a, huma.Operation{
		OperationID: "get-run", Method: http.MethodGet, Path: "/v1/runs/{id}",
		Summary: "Read a run's review", Tags: tags,
		Description: "Every recorded field of the run: status, kind, pinned facts, phase statuses, the caller's available actions, " +
			"the decision, recovery lease and per-attempt evidence. Fields that are not recorded are listed in not_recorded.",
	}, operationOptions{}, func(ctx context.Context, in *IDPath) (*Single[RunView], error) {
		return single(ctx, a, func(p access.Principal) (RunView, error) {
			r, err := a.deps.Services.Runs.GetRun(ctx, p, in.ID)
			if err != nil {
				return RunView{}, err
			}
			return a.runView(ctx, a.deps.DB, p, r)
		})
	})

	register(a, huma.Operation{
		OperationID: "list-run-logs", Method: http.MethodGet, Path: "/v1/runs/{id}/logs",
		Summary: "Read a run's sanitized log chunks", Tags: tags,
	}, operationOptions{}, func(ctx context.Context, in *logsInput) (*LogsOutput, error) {
		p, err := access.PrincipalFrom(ctx)
		if err != nil {
			return nil, a.fail(ctx, err)
		}
		chunks, err := a.deps.Services.Runs.Logs(ctx, p, in.ID, run.LogQuery{After: in.After, Limit: in.Limit, Tail: in.Tail, Phase: in.Phase})
		if err != nil {
			return nil, a.fail(ctx, err)
		}
		out := &LogsOutput{}
		out.Body.Data = mapSlice(chunks, func(c run.LogChunk) LogChunkView {
			return LogChunkView{ID: in.ID + ":" + strconv.FormatInt(c.Sequence, 10), Object: "log_chunk", LogChunk: c}
		})
		if n := len(chunks); n > 0 {
			out.LastSequence = strconv.FormatInt(chunks[n-1].Sequence, 10)
		}
		return out, nil
	})

	register(a, huma.Operation{
		OperationID: "get-run-plan-changes", Method: http.MethodGet, Path: "/v1/runs/{id}/plan-changes",
		Summary: "Read a run's redacted plan diff (cairn.plan-diff/v1)", Tags: tags,
	}, operationOptions{}, func(ctx context.Context, in *IDPath) (*Single[PlanChangesView], error) {
		return single(ctx, a, func(p access.Principal) (PlanChangesView, error) {
			rc, err := a.deps.Services.Runs.PlanChanges(ctx, p, in.ID)
			if err != nil {
				return PlanChangesView{}, err
			}
			defer rc.Close()
			view := PlanChangesView{ID: in.ID, Object: "plan_changes"}
			return view, json.NewDecoder(io.LimitReader(rc, plandiff.MaxBytes+1)).Decode(&view.Artifact)
		})
	})

	// Approving is a protected mutation (the service also rechecks the
	// apply gate); rejecting discards the run, which like cancellation a
	// suspension does not stop.
	bindingDescription := "The body must name the run's current plan digest, policy result digest, predecessor state version and " +
		"dependency lock digest; any other binding is stale and rejected with 409 RUN_REVIEW_STALE."
	register(a, huma.Operation{
		OperationID: "approve-run", Method: http.MethodPost, Path: "/v1/runs/{id}/actions/approve",
		Summary: "Record approve of the exact review", Tags: tags, Description: bindingDescription,
	}, operationOptions{mutation: true, admit: admitRun}, func(ctx context.Context, in *decideInput) (*Mutated[RunView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (RunView, error) {
				r, err := a.deps.Services.Runs.Approve(ctx, tx, p, in.ID, run.Binding(in.Body))
				if err != nil {
					return RunView{}, err
				}
				return a.runView(ctx, tx, p, r)
			})
	})
	register(a, huma.Operation{
		OperationID: "reject-run", Method: http.MethodPost, Path: "/v1/runs/{id}/actions/reject",
		Summary: "Record reject of the exact review", Tags: tags,
		Description: bindingDescription + " An optional reason (trimmed, 1–500 characters) is kept as decision.reason.",
	}, operationOptions{mutation: true, admit: notAdmitted}, func(ctx context.Context, in *rejectInput) (*Mutated[RunView], error) {
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (RunView, error) {
				r, err := a.deps.Services.Runs.Reject(ctx, tx, p, in.ID, run.Binding(in.Body.BindingBody), in.Body.Reason)
				if err != nil {
					return RunView{}, err
				}
				return a.runView(ctx, tx, p, r)
			})
	})

	register(a, huma.Operation{
		OperationID: "cancel-run", Method: http.MethodPost, Path: "/v1/runs/{id}/actions/cancel",
		Summary: "Cancel a run", Tags: tags,
		Description: "Any non-terminal run but one awaiting recovery. A running plan's sandbox is stopped. A running apply is " +
			"interrupted: its run token is revoked at once, tofu gets an interrupt and a grace period to stop and keep the state it " +
			"could not publish, which is sealed as the run's emergency state; the run stays applying until then and goes to recovery.",
	}, operationOptions{mutation: true, admit: notAdmitted}, func(ctx context.Context, in *cancelInput) (*Mutated[RunView], error) {
		return mutation(ctx, a, in.IdempotencyKey, struct{}{}, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (RunView, error) {
				r, err := a.deps.Services.Runs.Cancel(ctx, tx, p, in.ID)
				if err != nil {
					return RunView{}, err
				}
				return a.runView(ctx, tx, p, r)
			})
	})

	register(a, huma.Operation{
		OperationID: "force-execute-run", Method: http.MethodPost, Path: "/v1/runs/{id}/actions/force-execute",
		Summary: "Start a pending run now, discarding the runs ahead of it", Tags: tags,
		Description: "A pending run waiting behind another run of its workspace starts at once: every earlier unfinished run " +
			"(awaiting approval, waiting for a policy override or pending) is discarded as a discard would, its decision.reason " +
			"naming this run, and this run's plan is queued. Needs run:approve and run:create. A run ahead that is planning, " +
			"applying, approved or in recovery cannot be skipped: 409 RUN_QUEUE_NOT_DISCARDABLE and nothing changes. Starting " +
			"the plan passes new-run admission as creating a run does; a refusal is the retryable 503 service_unavailable.",
	}, operationOptions{mutation: true, admit: admitRun}, func(ctx context.Context, in *forceExecuteInput) (*Mutated[RunView], error) {
		return mutation(ctx, a, in.IdempotencyKey, struct{}{}, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (RunView, error) {
				r, err := a.deps.Services.Runs.ForceExecute(ctx, tx, p, in.ID)
				if err != nil {
					return RunView{}, err
				}
				return a.runView(ctx, tx, p, r)
			})
	})

	register(a, huma.Operation{
		OperationID: "release-run", Method: http.MethodPost, Path: "/v1/runs/{id}/actions/release",
		Summary: "Run an agent's run with the workspace's state, sensitive variables and credentials", Tags: tags,
		DefaultStatus: http.StatusCreated,
		Description: "A run an agent started plans without the workspace's state, sensitive variables, credential profiles and a " +
			"run token, and never applies (its review's untrusted field says so). A person signed in with run:create (never an " +
			"agent or a token) releases it: a new run of the same configuration version, kind, message and options, created by " +
			"that person, which gets them and goes through policy, approval and apply as any run does. The answer is the new " +
			"run; the agent's run names it in released_run_id (and who released it), and is canceled first if it had not ended " +
			"(that needs run:cancel too). Workload-identity tokens of the new run still carry run_initiator agent. A run no agent " +
			"started is 409 RUN_NOT_RELEASABLE; a second release is 409 RUN_ALREADY_RELEASED. Audited as run.released.",
	}, operationOptions{mutation: true, admit: admitRun}, func(ctx context.Context, in *releaseInput) (*Mutated[RunView], error) {
		return mutation(ctx, a, in.IdempotencyKey, struct{}{}, http.StatusCreated,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (RunView, error) {
				r, err := a.deps.Services.Runs.ReleaseRun(ctx, tx, p, in.ID)
				if err != nil {
					return RunView{}, err
				}
				return a.runView(ctx, tx, p, r)
			})
	})

	register(a, huma.Operation{
		OperationID: "recover-run", Method: http.MethodPost, Path: "/v1/runs/{id}/actions/recover",
		Summary: "Resolve a run whose apply outcome is uncertain", Tags: tags,
		Description: "Needs run:recover and state:recover and a password re-entry within 15 minutes. The caller holds a 15-minute " +
			"recovery lease; after it expires another caller may take over with confirm_takeover. The apply is never retried.",
	}, operationOptions{mutation: true, admit: notAdmitted}, func(ctx context.Context, in *recoverInput) (*Mutated[RunView], error) {
		// Recovery commits in steps (lease, state import, resolution), so
		// the key is held across them and the answer is recorded in the
		// resolving transaction.
		return heldMutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusOK,
			func(ctx context.Context, p access.Principal, settle func(context.Context, *sqlx.Tx, RunView) error) error {
				_, err := a.deps.Services.Runs.Recover(ctx, p, in.ID, run.RecoverInput(in.Body),
					func(ctx context.Context, tx *sqlx.Tx, r run.Run) error {
						view, err := a.runView(ctx, tx, p, r)
						if err != nil {
							return err
						}
						return settle(ctx, tx, view)
					})
				return err
			})
	})
}

// uploadConfiguration streams the archive in before the idempotent
// transaction: the bytes are validated and sealed first, then the
// version row, its audit evidence and the stored response commit together.
// A replay returns the first answer and drops the duplicate bytes.
func (a *API) uploadConfiguration(ctx context.Context, in *uploadConfigurationInput) (*Mutated[ConfigurationVersionView], error) {
	p, err := access.PrincipalFrom(ctx)
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	runs := a.deps.Services.Runs
	if err := runs.ReadyToUpload(ctx, p, in.ID); err != nil {
		return nil, a.fail(ctx, err)
	}
	body, _ := ctx.Value(bodyStreamKey{}).(io.Reader)
	if body == nil {
		return nil, a.fail(ctx, run.ArchiveError{Code: "archive_empty"})
	}
	staged, err := runs.StageArchive(ctx, p.OrganizationID, body)
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	input := map[string]any{"workspace_id": in.ID, "sha256": run.HexDigest(staged.Digests.SHA256), "size_bytes": staged.Digests.Size}
	out, err := mutation(ctx, a, in.IdempotencyKey, input, http.StatusCreated,
		func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (ConfigurationVersionView, error) {
			cv, err := runs.CreateUploadedConfiguration(ctx, tx, p, in.ID, staged)
			return configurationView(cv), err
		})
	if err != nil || out.Replayed == "true" {
		runs.DiscardStaged(ctx, staged)
	}
	return out, err
}
