package v1

import (
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/cairnhq/cairn/api/audit"
	"github.com/cairnhq/cairn/api/serviceaccount"
	"github.com/cairnhq/cairn/api/workspace"
)

// The public shapes of /v1 resources. Domain rows never leave the API
// directly: each has a view that names exactly what a client may see.

// ProjectView is a project.
type ProjectView struct {
	ID        string    `json:"id" doc:"Project ID (prj_…)."`
	Object    string    `json:"object" enum:"project"`
	Name      string    `json:"name"`
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
}

func projectView(p workspace.Project) ProjectView {
	return ProjectView{ID: p.ID, Object: "project", Name: p.Name, CreatedBy: p.CreatedBy, CreatedAt: p.CreatedAt}
}

// ExecutionSettingsView is a workspace's current execution settings.
type ExecutionSettingsView struct {
	Version     int    `json:"version" doc:"Immutable settings version; runs pin the version current at their creation."`
	ToolVersion string `json:"tool_version" doc:"Exact tool version: an OpenTofu version, or terraform-<version> for Terraform."`
	Region      string `json:"region" enum:"us,eu"`
	Platform    string `json:"platform" enum:"linux_amd64,linux_arm64"`
}

// WorkspaceView is a workspace.
type WorkspaceView struct {
	ID                string                `json:"id" doc:"Workspace ID (ws_…)."`
	Object            string                `json:"object" enum:"workspace"`
	ProjectID         string                `json:"project_id"`
	Name              string                `json:"name" doc:"Display name, unique in the organization; renamable."`
	Slug              string                `json:"slug" doc:"Lowercase URL slug, at most 90 characters; never changes."`
	CloudName         string                `json:"cloud_name" doc:"Selector for the remote-backend protocol; never changes."`
	ExecutionSettings ExecutionSettingsView `json:"execution_settings"`
	ExecutionMode     string                `json:"execution_mode" enum:"local,remote" doc:"How the remote-backend CLI runs operations: local keeps only state in Cairn."`
	Locked            bool                  `json:"locked"`
	LockedBy          *LockHolderView       `json:"locked_by" doc:"Who holds the state lock; null when unlocked."`
	CurrentRun        *WorkspaceRunView     `json:"current_run" doc:"The newest non-terminal run (a plan-only run waiting on its saved plan aside); null when none, or when the caller may not read the workspace's runs."`
	CreatedBy         string                `json:"created_by"`
	CreatedAt         time.Time             `json:"created_at"`
}

// WorkspaceRunView names a workspace's current run.
type WorkspaceRunView struct {
	ID     string `json:"id" doc:"Run ID (run_…)."`
	Status string `json:"status"`
}

// LockHolderView names a workspace lock's holder.
type LockHolderView struct {
	Kind     string    `json:"kind" enum:"user,service_account,operator,run,team"`
	ID       string    `json:"id"`
	Reason   string    `json:"reason"`
	LockedAt time.Time `json:"locked_at"`
}

func workspaceView(w workspace.Workspace) WorkspaceView {
	v := WorkspaceView{
		ID: w.ID, Object: "workspace", ProjectID: w.ProjectID, Name: w.Name, Slug: w.Slug, CloudName: w.CloudName,
		ExecutionSettings: ExecutionSettingsView{
			Version: w.SettingsVersion, ToolVersion: w.ToolVersion, Region: w.Region, Platform: w.Platform,
		},
		ExecutionMode: w.ExecutionMode, Locked: w.Locked(),
		CreatedBy: w.CreatedBy, CreatedAt: w.CreatedAt,
	}
	if w.Locked() {
		v.LockedBy = &LockHolderView{Kind: *w.LockedByKind, ID: *w.LockedByID, Reason: w.LockReason, LockedAt: *w.LockedAt}
	}
	return v
}

// VariableView is a workspace variable. A sensitive variable's value is
// never returned.
type VariableView struct {
	ID           string    `json:"id" doc:"Variable ID (var_…)."`
	Object       string    `json:"object" enum:"workspace_variable"`
	WorkspaceID  string    `json:"workspace_id"`
	Key          string    `json:"key"`
	Category     string    `json:"category" enum:"terraform,env" doc:"An input variable (terraform), or an environment variable of the run's commands (env), which the remote-backend API can set."`
	Value        *string   `json:"value" doc:"The value; null for sensitive variables."`
	Sensitive    bool      `json:"sensitive"`
	HCL          bool      `json:"hcl"`
	Description  string    `json:"description"`
	ValueVersion int       `json:"value_version" doc:"Advances only when the value changes."`
	ValueDigest  string    `json:"value_digest" doc:"Keyed digest of the value; changes only when the value changes."`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
}

func variableView(v workspace.Variable) VariableView {
	value := v.Value
	if v.Sensitive {
		value = nil
	}
	return VariableView{
		ID: v.ID, Object: "workspace_variable", WorkspaceID: v.WorkspaceID, Key: v.Key, Category: v.Category, Value: value,
		Sensitive: v.Sensitive, HCL: v.HCL, Description: v.Description, ValueVersion: v.ValueVersion,
		ValueDigest: hex.EncodeToString(v.ValueDigest), CreatedAt: v.CreatedAt, UpdatedAt: v.UpdatedAt,
	}
}

// ServiceAccountView is a service account.
type ServiceAccountView struct {
	ID          string    `json:"id" doc:"Service account ID (sa_…)."`
	Object      string    `json:"object" enum:"service_account"`
	Name        string    `json:"name"`
	Description string    `json:"description"`
	CreatedBy   string    `json:"created_by"`
	CreatedAt   time.Time `json:"created_at"`
}

func serviceAccountView(a serviceaccount.ServiceAccount) ServiceAccountView {
	return ServiceAccountView{ID: a.ID, Object: "service_account", Name: a.Name, Description: a.Description,
		CreatedBy: a.CreatedBy, CreatedAt: a.CreatedAt}
}

// ServiceAccountDetailView is a service account with its tokens.
type ServiceAccountDetailView struct {
	ServiceAccountView
	Tokens          []TokenView `json:"tokens" doc:"Live tokens first, then revoked and expired ones; newest first within each; at most 100."`
	TokensTruncated bool        `json:"tokens_truncated" doc:"The account has more tokens than shown; the oldest revoked or expired ones are left out."`
}

// TokenView is an issued service-account token.
type TokenView struct {
	ID               string     `json:"id" doc:"Token ID (sat_…)."`
	Object           string     `json:"object" enum:"service_account_token"`
	ServiceAccountID string     `json:"service_account_id"`
	Permissions      []string   `json:"permissions"`
	ProjectID        *string    `json:"project_id"`
	WorkspaceID      *string    `json:"workspace_id"`
	ExpiresAt        time.Time  `json:"expires_at"`
	CreatedBy        string     `json:"created_by"`
	CreatedAt        time.Time  `json:"created_at"`
	RevokedAt        *time.Time `json:"revoked_at"`
}

func tokenView(t serviceaccount.Token) TokenView {
	return TokenView{
		ID: t.ID, Object: "service_account_token", ServiceAccountID: t.ServiceAccountID, Permissions: t.Permissions,
		ProjectID: t.ProjectID, WorkspaceID: t.WorkspaceID, ExpiresAt: t.ExpiresAt, CreatedBy: t.CreatedBy,
		CreatedAt: t.CreatedAt, RevokedAt: t.RevokedAt,
	}
}

// IssuedTokenView is the issue response: the only place a plaintext exists.
type IssuedTokenView struct {
	TokenView
	Token string `json:"token" doc:"The sst_ token. Shown once; store it now."`
}

// AuditActorView names who caused an event.
type AuditActorView struct {
	Type string `json:"type" enum:"user,service_account,operator,system,run,team"`
	ID   string `json:"id"`
}

// AuditTargetView names what an event is about.
type AuditTargetView struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// AuditEventView is one sanitized audit event.
type AuditEventView struct {
	ID        string          `json:"id" doc:"Event ID (aud_…)."`
	Object    string          `json:"object" enum:"audit_event"`
	Action    string          `json:"action"`
	Actor     AuditActorView  `json:"actor"`
	Target    AuditTargetView `json:"target"`
	RequestID string          `json:"request_id"`
	Evidence  map[string]any  `json:"evidence" doc:"Sanitized identifiers, enums and counts."`
	CreatedAt time.Time       `json:"created_at"`
}

func auditEventView(e audit.Event) AuditEventView {
	evidence := map[string]any{}
	_ = json.Unmarshal(e.Evidence, &evidence)
	return AuditEventView{
		ID: e.ID, Object: "audit_event", Action: e.Action,
		Actor:     AuditActorView{Type: e.ActorType, ID: e.ActorID},
		Target:    AuditTargetView{Type: e.TargetType, ID: e.TargetID},
		RequestID: e.RequestID, Evidence: evidence, CreatedAt: e.CreatedAt,
	}
}

// LaunchAccessView is the answer of an admission probe.
type LaunchAccessView struct {
	ID        string `json:"id" doc:"The probed organization, workspace or run."`
	Object    string `json:"object" enum:"launch_access"`
	Scope     string `json:"scope" enum:"organization,workspace,run"`
	Admission string `json:"admission" enum:"open,canary" doc:"canary: only this exact workspace's surface may be shown."`
}
