package v1

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/github"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/httpx"
)

// InstallationView is the organization's code-host installation status.
type InstallationView struct {
	ID             string     `json:"id" doc:"The organization's installation status (constant 'github_installation')."`
	Object         string     `json:"object" enum:"github_installation"`
	Status         string     `json:"status" enum:"connected,suspended,not_installed"`
	InstallationID *int64     `json:"installation_id"`
	AccountLogin   *string    `json:"account_login"`
	ConnectedAt    *time.Time `json:"connected_at"`
}

// InstallationStartView is where the person installs the app.
type InstallationStartView struct {
	ID         string    `json:"id"`
	Object     string    `json:"object" enum:"github_installation_start"`
	InstallURL string    `json:"install_url" doc:"The provider's install page, carrying a signed single-use state."`
	ExpiresAt  time.Time `json:"expires_at" doc:"The state expires ten minutes after it was issued."`
}

// RepositoryView is a repository selected in the organization's installation.
type RepositoryView struct {
	ID           string `json:"id"`
	Object       string `json:"object" enum:"github_repository"`
	RepositoryID int64  `json:"repository_id"`
	Owner        string `json:"owner"`
	Name         string `json:"name"`
}

// SourceSettingsView is one immutable source settings version.
type SourceSettingsView struct {
	ID                             string    `json:"id" doc:"Source settings version ID (src_…)."`
	Object                         string    `json:"object" enum:"workspace_source_settings"`
	WorkspaceID                    string    `json:"workspace_id"`
	Version                        int       `json:"version"`
	InstallationID                 int64     `json:"installation_id"`
	RepositoryID                   int64     `json:"repository_id"`
	RepositoryOwner                string    `json:"repository_owner"`
	RepositoryName                 string    `json:"repository_name"`
	TrackedBranch                  string    `json:"tracked_branch"`
	WorkingDirectory               string    `json:"working_directory"`
	TriggerPaths                   []string  `json:"trigger_paths"`
	SpeculativeCredentialVersionID *string   `json:"speculative_credential_version_id"`
	ForkPullRequests               string    `json:"fork_pull_requests" enum:"hold,plan" doc:"Pull requests from forks: hold (a person plans each head commit) or plan (planned automatically as untrusted runs, throttled per repository)."`
	CreatedBy                      string    `json:"created_by"`
	CreatedAt                      time.Time `json:"created_at"`
}

func sourceSettingsView(s github.SourceSettings) SourceSettingsView {
	paths := []string(s.TriggerPaths)
	if paths == nil {
		paths = []string{}
	}
	return SourceSettingsView{ID: s.ID, Object: "workspace_source_settings", WorkspaceID: s.WorkspaceID, Version: s.Version,
		InstallationID: s.InstallationID, RepositoryID: s.RepositoryID, RepositoryOwner: s.RepositoryOwner,
		RepositoryName: s.RepositoryName, TrackedBranch: s.TrackedBranch, WorkingDirectory: s.WorkingDirectory,
		TriggerPaths: paths, SpeculativeCredentialVersionID: s.SpeculativeCredentialVersionID,
		ForkPullRequests: s.ForkPullRequests, CreatedBy: s.CreatedByID, CreatedAt: s.CreatedAt}
}

// WorkspaceSourceView is a workspace's current source settings and history.
type WorkspaceSourceView struct {
	ID      string               `json:"id" doc:"The workspace ID."`
	Object  string               `json:"object" enum:"workspace_source"`
	Current *SourceSettingsView  `json:"current" doc:"The newest version, or null when the workspace has no source."`
	History []SourceSettingsView `json:"history" doc:"Every version, newest first (at most 100)."`
}

// SourceSettingsRequest is the body of PUT /v1/workspaces/{id}/source.
type SourceSettingsRequest struct {
	RepositoryID                   int64    `json:"repository_id" minimum:"1" doc:"A repository selected in the organization's installation."`
	TrackedBranch                  string   `json:"tracked_branch" minLength:"1" maxLength:"255"`
	WorkingDirectory               string   `json:"working_directory,omitempty" maxLength:"1024" doc:"Repository-relative directory; empty for the root."`
	TriggerPaths                   []string `json:"trigger_paths,omitempty" maxItems:"100" doc:"Globs with *, ** and ?; empty matches every change."`
	SpeculativeCredentialVersionID *string  `json:"speculative_credential_version_id,omitempty" maxLength:"64" doc:"A verified, enabled speculative_plan federation version of this workspace, for same-repository pull requests."`
	ForkPullRequests               string   `json:"fork_pull_requests,omitempty" enum:"hold,plan" doc:"Pull requests from forks: hold (the default: each waits for a person with run:create to plan its exact head commit) or plan (planned automatically, without credentials, sensitive variables or state access, at most CAIRN_FORK_RUNS_PER_HOUR per repository in an hour; past it they are held)."`
}

type putSourceInput struct {
	IdempotencyHeader
	IDPath
	Body SourceSettingsRequest
}

type startInstallationInput struct {
	IdempotencyHeader
}

type installationCallbackInput struct {
	State          string `query:"state" maxLength:"200"`
	InstallationID int64  `query:"installation_id"`
	SetupAction    string `query:"setup_action" maxLength:"32"`
	// Code is the installer's authorization code, present when the app
	// requests user authorization during installation (required here).
	Code string `query:"code" maxLength:"256"`
}

// Redirect answers with 303 See Other to Location.
type Redirect struct {
	Status   int
	Location string `header:"Location"`
}

type webhookInput struct {
	DeliveryID string `header:"X-GitHub-Delivery" doc:"The provider's delivery ID: the global replay identity."`
	Event      string `header:"X-GitHub-Event"`
	Signature  string `header:"X-Hub-Signature-256" doc:"sha256=HMAC of the raw body under the webhook secret."`
}

// DeliveryView is the receiver's answer; a replay returns the recorded one.
type DeliveryView struct {
	ID           string   `json:"id" doc:"The delivery ID."`
	Object       string   `json:"object" enum:"github_delivery"`
	Result       string   `json:"result" enum:"accepted,ignored"`
	Outcome      string   `json:"outcome"`
	IngestionIDs []string `json:"source_ingestion_ids"`
	Replayed     bool     `json:"replayed"`
}

// WebhookBodyLimit is the largest delivery read (SPEC §8).
const WebhookBodyLimit = github.MaxWebhookBytes

func (a *API) github() (*github.Service, error) {
	if a.deps.Services.GitHub == nil {
		return nil, fault.ErrUnavailable
	}
	return a.deps.Services.GitHub, nil
}

func (a *API) registerGitHub() {
	tags := []string{"Code host"}

	register(a, huma.Operation{
		OperationID: "get-github-installation", Method: http.MethodGet, Path: "/v1/github/installation",
		Summary: "Read the organization's code-host installation status", Tags: tags,
	}, operationOptions{}, func(ctx context.Context, _ *struct{}) (*Single[InstallationView], error) {
		return single(ctx, a, func(p access.Principal) (InstallationView, error) {
			svc, err := a.github()
			if err != nil {
				return InstallationView{}, err
			}
			st, err := svc.Status(ctx, p)
			return InstallationView{ID: "github_installation", Object: "github_installation", Status: st.Status,
				InstallationID: st.InstallationID, AccountLogin: st.AccountLogin, ConnectedAt: st.ConnectedAt}, err
		})
	})

	register(a, huma.Operation{
		OperationID: "list-github-repositories", Method: http.MethodGet, Path: "/v1/github/repositories",
		Summary: "List the repositories selected in the organization's installation", Tags: tags,
	}, operationOptions{}, func(ctx context.Context, _ *struct{}) (*Listed[RepositoryView], error) {
		return whole(ctx, a, func(p access.Principal) ([]RepositoryView, error) {
			svc, err := a.github()
			if err != nil {
				return nil, err
			}
			rs, err := svc.Repositories(ctx, p)
			return mapSlice(rs, func(r github.Repository) RepositoryView {
				return RepositoryView{ID: strconv.FormatInt(r.RepositoryID, 10), Object: "github_repository",
					RepositoryID: r.RepositoryID, Owner: r.Owner, Name: r.Name}
			}), err
		})
	})

	register(a, huma.Operation{
		OperationID: "start-github-installation", Method: http.MethodPost, Path: "/v1/github/installations/start",
		Summary: "Start installing the code-host app", Tags: tags, DefaultStatus: http.StatusCreated,
		Description: "Needs vcs:install. Returns the provider's install URL with a signed state, single use, bound to the " +
			"organization and the caller, expiring after ten minutes. Refused (503) when the app is not configured.",
	}, operationOptions{mutation: true, admit: admitOrganization}, func(ctx context.Context, in *startInstallationInput) (*Mutated[InstallationStartView], error) {
		svc, err := a.github()
		if err != nil {
			return nil, a.fail(ctx, err)
		}
		return mutation(ctx, a, in.IdempotencyKey, struct{}{}, http.StatusCreated,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (InstallationStartView, error) {
				st, err := svc.StartInstallation(ctx, tx, p)
				return InstallationStartView{ID: "github_installation_start", Object: "github_installation_start",
					InstallURL: st.InstallURL, ExpiresAt: st.ExpiresAt}, err
			})
	})

	register(a, huma.Operation{
		OperationID: "complete-github-installation", Method: http.MethodGet, Path: "/v1/github/installations/callback",
		Summary: "The provider's installation callback", Tags: tags, DefaultStatus: http.StatusSeeOther,
		Description: "A provider-mandated state-changing GET, reached through the dashboard. Verifies the signed state " +
			"(single use, ten minutes, this organization and caller) and the installer's authorization code (the person must " +
			"be able to see the installation, else 403 GITHUB_INSTALLER_UNVERIFIED), then binds the installation under its fence: a " +
			"persistent race is a retryable 409 that leaves the state unconsumed. A suspended or revoked installation is " +
			"never reactivated. Success redirects to the dashboard.",
	}, operationOptions{}, func(ctx context.Context, in *installationCallbackInput) (*Redirect, error) {
		svc, err := a.github()
		if err != nil {
			return nil, a.fail(ctx, err)
		}
		p, err := access.PrincipalFrom(ctx)
		if err != nil {
			return nil, a.fail(ctx, err)
		}
		if _, err := svc.CompleteInstallation(ctx, p, in.State, in.Code, in.InstallationID); err != nil {
			return nil, a.fail(ctx, err)
		}
		target := strings.TrimRight(a.deps.Config.DashboardURL, "/") + "/organization/code-host?" +
			url.Values{"installation": {"connected"}}.Encode()
		return &Redirect{Status: http.StatusSeeOther, Location: target}, nil
	})

	register(a, huma.Operation{
		OperationID: "get-workspace-source", Method: http.MethodGet, Path: "/v1/workspaces/{id}/source",
		Summary: "Read a workspace's source settings and their history", Tags: tags,
	}, operationOptions{}, func(ctx context.Context, in *IDPath) (*Single[WorkspaceSourceView], error) {
		return single(ctx, a, func(p access.Principal) (WorkspaceSourceView, error) {
			svc, err := a.github()
			if err != nil {
				return WorkspaceSourceView{}, err
			}
			hist, err := svc.SourceHistory(ctx, p, in.ID)
			if err != nil {
				return WorkspaceSourceView{}, err
			}
			out := WorkspaceSourceView{ID: in.ID, Object: "workspace_source", History: mapSlice(hist, sourceSettingsView)}
			if len(out.History) > 0 {
				cur := out.History[0]
				out.Current = &cur
			}
			return out, nil
		})
	})

	register(a, huma.Operation{
		OperationID: "put-workspace-source", Method: http.MethodPut, Path: "/v1/workspaces/{id}/source",
		Summary: "Save a new immutable source settings version", Tags: tags, DefaultStatus: http.StatusCreated,
		Description: "Needs workspace:admin. An exact replay returns the same version; two writers racing for the same " +
			"version number get 409 WORKSPACE_SOURCE_SETTINGS_CONFLICT.",
	}, operationOptions{mutation: true, admit: admitWorkspace}, func(ctx context.Context, in *putSourceInput) (*Mutated[SourceSettingsView], error) {
		svc, err := a.github()
		if err != nil {
			return nil, a.fail(ctx, err)
		}
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusCreated,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (SourceSettingsView, error) {
				st, err := svc.SaveSource(ctx, tx, p, in.ID, github.SourceInput{RepositoryID: in.Body.RepositoryID,
					TrackedBranch: in.Body.TrackedBranch, WorkingDirectory: in.Body.WorkingDirectory,
					TriggerPaths: in.Body.TriggerPaths, SpeculativeCredentialVersionID: in.Body.SpeculativeCredentialVersionID,
					ForkPullRequests: in.Body.ForkPullRequests})
				return sourceSettingsView(st), err
			})
	})

	register(a, huma.Operation{
		OperationID: "receive-github-webhook", Method: http.MethodPost, Path: "/v1/github/webhooks",
		Summary: "Receive a signed code-host delivery", Tags: tags,
		Description: "No session and no Idempotency-Key: X-Hub-Signature-256 over the raw body (at most 10,000,000 bytes) " +
			"authenticates it before it is parsed, and X-GitHub-Delivery is its global replay identity. An exact replay " +
			"returns the recorded answer and dispatches nothing; the same ID with other content is 409.",
		// No schema: huma must not read or parse the body, which is
		// verified as raw bytes first.
		RequestBody: &huma.RequestBody{Required: true, Description: "The provider's signed JSON payload, verified as raw bytes.",
			Content: map[string]*huma.MediaType{"application/json": {}}},
	}, operationOptions{public: true, signedDelivery: true, admit: notAdmitted, bodyLimit: WebhookBodyLimit},
		func(ctx context.Context, in *webhookInput) (*Single[DeliveryView], error) {
			svc, err := a.github()
			if err != nil {
				return nil, a.fail(ctx, err)
			}
			if !svc.App().Ready() {
				return nil, a.fail(ctx, github.ErrUnconfigured)
			}
			stream, _ := ctx.Value(bodyStreamKey{}).(io.Reader)
			if stream == nil {
				return nil, a.fail(ctx, github.ErrSignature)
			}
			body, err := io.ReadAll(io.LimitReader(stream, WebhookBodyLimit+1))
			if err != nil {
				var tooLarge huma.StatusError
				if errors.As(err, &tooLarge) {
					return nil, a.fail(ctx, httpx.ErrTooLarge)
				}
				return nil, a.fail(ctx, err)
			}
			if len(body) > WebhookBodyLimit {
				return nil, a.fail(ctx, httpx.ErrTooLarge)
			}
			res, err := svc.Receive(ctx, github.Headers{DeliveryID: in.DeliveryID, Event: in.Event, Signature: in.Signature}, body)
			if err != nil {
				return nil, a.fail(ctx, err)
			}
			ids := []string(res.Delivery.IngestionIDs)
			if ids == nil {
				ids = []string{}
			}
			out := &Single[DeliveryView]{}
			out.Body.Data = DeliveryView{ID: res.Delivery.DeliveryID, Object: "github_delivery", Result: res.Delivery.Result,
				Outcome: res.Delivery.Outcome, IngestionIDs: ids, Replayed: res.Replayed}
			return out, nil
		})
}
