package mcp

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cairnhq/cairn/api/platform/failure"
)

// Bounds of an inline configuration: small by design (an agent proposing
// a change, not shipping a repository); larger ones go through /v1 or the
// CLI.
const (
	maxInlineFiles = 100
	maxInlineBytes = 1 << 20
	maxPathBytes   = 256
)

// Output is every tool's structured result: /v1's own envelope (data and
// meta, with next_cursor on lists), so an agent reads the same fields the
// API documents.
type Output = map[string]any

// Inputs. Field descriptions become the tools' JSON schemas.
type (
	listInput struct {
		Cursor string `json:"cursor,omitempty" jsonschema:"next_cursor of the previous page"`
		Limit  int    `json:"limit,omitempty" jsonschema:"page size, 1 to 100"`
	}
	idInput struct {
		ID string `json:"id" jsonschema:"the resource ID"`
	}
	listWorkspacesInput struct {
		listInput
		ProjectID string `json:"project_id,omitempty" jsonschema:"only workspaces of this project"`
	}
	listRunsInput struct {
		listInput
		WorkspaceID string `json:"workspace_id,omitempty" jsonschema:"only runs of this workspace"`
	}
	runLogsInput struct {
		RunID string `json:"run_id" jsonschema:"the run ID"`
		Tail  int    `json:"tail,omitempty" jsonschema:"the newest n log chunks, 1 to 100 (default 50)"`
		Phase string `json:"phase,omitempty" jsonschema:"only this phase's chunks: plan, policy or apply (default all)"`
	}
	runInput struct {
		RunID string `json:"run_id" jsonschema:"the run ID"`
	}
	// keyInput is the idempotency key of a mutation.
	keyInput struct {
		IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"repeat a call safely"`
	}
	stateVersionsInput struct {
		listInput
		WorkspaceID string `json:"workspace_id" jsonschema:"the workspace ID"`
	}
	uploadInput struct {
		WorkspaceID    string            `json:"workspace_id" jsonschema:"the workspace ID"`
		Files          map[string]string `json:"files" jsonschema:"OpenTofu configuration files by relative path (e.g. main.tf), as text; at most 100 files and 1 MiB"`
		IdempotencyKey string            `json:"idempotency_key,omitempty" jsonschema:"repeat a call safely: the same key and files return the same version"`
	}
	startRunInput struct {
		WorkspaceID            string `json:"workspace_id" jsonschema:"the workspace ID"`
		ConfigurationVersionID string `json:"configuration_version_id" jsonschema:"from upload_configuration"`
		Kind                   string `json:"kind" jsonschema:"plan_only (plan and policy, never applied) or plan_and_apply (applied only after a person approves)"`
		Message                string `json:"message,omitempty" jsonschema:"why the run was started, shown to the approver"`
		keyInput
	}
	cancelInput struct {
		runInput
		keyInput
	}
	rejectInput struct {
		RunID                     string  `json:"run_id" jsonschema:"the run ID"`
		PlanDigest                string  `json:"plan_digest" jsonschema:"the plan digest of the run as reviewed (get_run)"`
		PolicyResultDigest        string  `json:"policy_result_digest" jsonschema:"the policy result digest as reviewed (get_run)"`
		PredecessorStateVersionID *string `json:"predecessor_state_version_id" jsonschema:"the state the plan was made against (get_run); null before the first state"`
		DependencyLockDigest      string  `json:"dependency_lock_digest" jsonschema:"the dependency lock digest as reviewed (get_run)"`
		keyInput
	}
)

func (l listInput) query() url.Values {
	q := url.Values{}
	if l.Cursor != "" {
		q.Set("cursor", l.Cursor)
	}
	if l.Limit > 0 {
		q.Set("limit", strconv.Itoa(l.Limit))
	}
	return q
}

// pathID refuses IDs that would change the request's path.
func pathID(id string) (string, error) {
	if id == "" || len(id) > 64 || strings.ContainsAny(id, "/?#%\\") || id == "." || id == ".." {
		return "", errors.New("invalid ID")
	}
	return url.PathEscape(id), nil
}

func boolPtr(b bool) *bool { return &b }

var (
	readOnly    = &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: boolPtr(false)}
	additive    = &sdk.ToolAnnotations{DestructiveHint: boolPtr(false), IdempotentHint: true, OpenWorldHint: boolPtr(false)}
	destructive = &sdk.ToolAnnotations{DestructiveHint: boolPtr(true), IdempotentHint: true, OpenWorldHint: boolPtr(false)}
)

// ToolNames lists the tools, each one /v1 agent operation (reject_run
// aside, none of them a decision).
var ToolNames = []string{
	"list_projects", "get_project", "list_workspaces", "get_workspace", "list_runs", "get_run", "get_run_logs",
	"get_plan_changes", "get_policy_result", "list_state_versions", "get_state_version",
	"upload_configuration", "start_run", "cancel_run", "reject_run",
}

// token is the caller's raw access token, set by verify.
func token(req *sdk.CallToolRequest) (string, error) {
	if req.Extra == nil || req.Extra.TokenInfo == nil {
		return "", errors.New("not authenticated")
	}
	raw, _ := req.Extra.TokenInfo.Extra[tokenKey].(string)
	if raw == "" {
		return "", errors.New("not authenticated")
	}
	return raw, nil
}

// errToolFailed is what a caller sees of a tool that failed unexpectedly.
var errToolFailed = errors.New("the tool failed unexpectedly; try again later")

// tool registers a tool whose handler turns its input into one /v1 call.
func tool[In any](s *Server, server *sdk.Server, name, title, description string, ann *sdk.ToolAnnotations, build func(In) (call, error)) {
	a := *ann
	a.Title = title
	sdk.AddTool(server, &sdk.Tool{Name: name, Title: title, Description: description, Annotations: &a},
		func(ctx context.Context, req *sdk.CallToolRequest, in In) (_ *sdk.CallToolResult, _ Output, err error) {
			defer func() {
				// A panic in a tool (or the client under it) fails the
				// call alone; the log gets its classification and the
				// tool's name, never the value or the stack.
				if p := recover(); p != nil {
					failure.Report(ctx, s.opts.Logger, p, slog.String("tool", name))
					err = errToolFailed
				}
			}()
			tok, err := token(req)
			if err != nil {
				return nil, nil, err
			}
			c, err := build(in)
			if err != nil {
				return nil, nil, err
			}
			if c.method != http.MethodGet && c.key == "" {
				if c.key, err = newKey(); err != nil {
					return nil, nil, err
				}
			}
			out, err := s.api.do(ctx, tok, c)
			if err != nil {
				return nil, nil, err
			}
			return nil, out, nil
		})
}

func (s *Server) addTools(server *sdk.Server) {
	get := func(format string, id string) (call, error) {
		escaped, err := pathID(id)
		if err != nil {
			return call{}, err
		}
		return call{method: http.MethodGet, path: fmt.Sprintf(format, escaped)}, nil
	}
	tool(s, server, "list_projects", "List projects", "Lists the projects of the organization you were authorized in, newest first.", readOnly,
		func(in listInput) (call, error) {
			return call{method: http.MethodGet, path: "/v1/projects", query: in.query()}, nil
		})
	tool(s, server, "get_project", "Get a project", "Reads one project.", readOnly,
		func(in idInput) (call, error) { return get("/v1/projects/%s", in.ID) })
	tool(s, server, "list_workspaces", "List workspaces", "Lists workspaces, optionally of one project, newest first.", readOnly,
		func(in listWorkspacesInput) (call, error) {
			q := in.query()
			if in.ProjectID != "" {
				q.Set("project_id", in.ProjectID)
			}
			return call{method: http.MethodGet, path: "/v1/workspaces", query: q}, nil
		})
	tool(s, server, "get_workspace", "Get a workspace", "Reads one workspace: its settings, current state version and latest run.", readOnly,
		func(in idInput) (call, error) { return get("/v1/workspaces/%s", in.ID) })
	tool(s, server, "list_runs", "List runs", "Lists runs, optionally of one workspace, newest first.", readOnly,
		func(in listRunsInput) (call, error) {
			q := in.query()
			if in.WorkspaceID != "" {
				q.Set("workspace_id", in.WorkspaceID)
			}
			return call{method: http.MethodGet, path: "/v1/runs", query: q}, nil
		})
	tool(s, server, "get_run", "Get a run (the review)",
		"Reads one run: status, plan summary, policy outcome, the digests a decision binds to and the actions you may take.", readOnly,
		func(in runInput) (call, error) { return get("/v1/runs/%s", in.RunID) })
	tool(s, server, "get_run_logs", "Read run logs", "Reads the newest log chunks of a run (redacted as people see them), of one phase (plan, policy or apply) or all.", readOnly,
		func(in runLogsInput) (call, error) {
			c, err := get("/v1/runs/%s/logs", in.RunID)
			tail := in.Tail
			if tail <= 0 || tail > 100 {
				tail = 50
			}
			c.query = url.Values{"tail": {strconv.Itoa(tail)}}
			if in.Phase != "" {
				// The API refuses a phase it does not know.
				c.query.Set("phase", in.Phase)
			}
			return c, err
		})
	tool(s, server, "get_plan_changes", "Read plan changes", "Reads the resource changes of a run's plan (sensitive values redacted).", readOnly,
		func(in runInput) (call, error) { return get("/v1/runs/%s/plan-changes", in.RunID) })
	tool(s, server, "get_policy_result", "Read the policy result", "Reads the policy evaluation of a run: each policy's outcome and findings.", readOnly,
		func(in runInput) (call, error) { return get("/v1/runs/%s/policy", in.RunID) })
	tool(s, server, "list_state_versions", "List state versions", "Lists a workspace's state versions (metadata only, never state contents).", readOnly,
		func(in stateVersionsInput) (call, error) {
			c, err := get("/v1/workspaces/%s/state-versions", in.WorkspaceID)
			c.query = in.query()
			return c, err
		})
	tool(s, server, "get_state_version", "Get a state version", "Reads a state version's metadata (never its contents).", readOnly,
		func(in idInput) (call, error) { return get("/v1/state-versions/%s", in.ID) })

	tool(s, server, "upload_configuration", "Upload a configuration",
		"Uploads a small OpenTofu configuration given inline as files; returns the configuration version to start a run with.", additive,
		func(in uploadInput) (call, error) {
			id, err := pathID(in.WorkspaceID)
			if err != nil {
				return call{}, err
			}
			archive, err := inlineArchive(in.Files)
			if err != nil {
				return call{}, err
			}
			return call{method: http.MethodPost, path: "/v1/workspaces/" + id + "/configuration-versions", body: archive,
				contentType: "application/gzip", key: in.IdempotencyKey}, nil
		})
	tool(s, server, "start_run", "Start a run",
		"Starts a plan_only or plan_and_apply run of an uploaded configuration. A run an agent starts plans without the "+
			"workspace's state, sensitive variables and credentials (as if nothing existed yet) and never applies; a person "+
			"reviews it and runs it with credentials in Cairn, then approves its plan.", additive,
		func(in startRunInput) (call, error) {
			return call{method: http.MethodPost, path: "/v1/runs", key: in.IdempotencyKey, body: map[string]any{
				"workspace_id": in.WorkspaceID, "configuration_version_id": in.ConfigurationVersionID, "kind": in.Kind, "message": in.Message,
			}}, nil
		})
	tool(s, server, "cancel_run", "Cancel a run", "Cancels a run that has not finished.", destructive,
		func(in cancelInput) (call, error) {
			id, err := pathID(in.RunID)
			return call{method: http.MethodPost, path: "/v1/runs/" + id + "/actions/cancel", key: in.IdempotencyKey}, err
		})
	tool(s, server, "reject_run", "Reject a run",
		"Rejects a run awaiting approval, bound to the plan and policy result you reviewed. Approving is not an agent's to do.", destructive,
		func(in rejectInput) (call, error) {
			id, err := pathID(in.RunID)
			return call{method: http.MethodPost, path: "/v1/runs/" + id + "/actions/reject", key: in.IdempotencyKey, body: map[string]any{
				"plan_digest": in.PlanDigest, "policy_result_digest": in.PolicyResultDigest,
				"predecessor_state_version_id": in.PredecessorStateVersionID, "dependency_lock_digest": in.DependencyLockDigest,
			}}, err
		})
}

// inlineArchive packs inline files into the .tar.gz /v1 takes. Paths must
// be relative and stay inside the archive.
func inlineArchive(files map[string]string) ([]byte, error) {
	if len(files) == 0 || len(files) > maxInlineFiles {
		return nil, fmt.Errorf("between 1 and %d files are required", maxInlineFiles)
	}
	total := 0
	names := make([]string, 0, len(files))
	for name, content := range files {
		clean := path.Clean(name)
		if name == "" || len(name) > maxPathBytes || clean != name || path.IsAbs(name) || clean == "." ||
			strings.HasPrefix(clean, "../") || clean == ".." || strings.ContainsAny(name, "\\\x00") {
			return nil, fmt.Errorf("file path %q must be a clean relative path", name)
		}
		total += len(content)
		names = append(names, name)
	}
	if total > maxInlineBytes {
		return nil, fmt.Errorf("inline files total more than %d bytes", maxInlineBytes)
	}
	slices.Sort(names)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	epoch := time.Unix(0, 0)
	for _, name := range names {
		content := files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
