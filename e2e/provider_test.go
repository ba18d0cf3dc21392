package e2e

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"
)

// providerWorkspace is what the tfe provider sends to create a workspace
// from a resource that sets only its name and project: its schema's
// defaults, with allow_destroy_plan set as given.
func providerWorkspace(name, projectID string, allowDestroyPlan bool) tfe.WorkspaceCreateOptions {
	return tfe.WorkspaceCreateOptions{
		Name:                       tfe.String(name),
		AllowDestroyPlan:           tfe.Bool(allowDestroyPlan),
		AutoApplyRunTrigger:        tfe.Bool(false),
		FileTriggersEnabled:        tfe.Bool(true),
		QueueAllRuns:               tfe.Bool(true),
		SpeculativeEnabled:         tfe.Bool(true),
		StructuredRunOutputEnabled: tfe.Bool(true),
		WorkingDirectory:           tfe.String(""),
		SettingOverwrites:          &tfe.WorkspaceSettingOverwritesOptions{ExecutionMode: tfe.Bool(false), AgentPool: tfe.Bool(false)},
		Project:                    &tfe.Project{ID: projectID},
	}
}

// managedState is a state holding one managed resource instance.
const managedState = `{"version":4,"terraform_version":"1.10.6","serial":1,"lineage":"provider-e2e","outputs":{},` +
	`"resources":[{"mode":"managed","type":"terraform_data","name":"x","provider":"provider[\"terraform.io/builtin/terraform\"]",` +
	`"instances":[{"schema_version":0,"attributes":{"id":"1"}}]}],"check_results":null}`

// TestProviderStyleWorkspaceLife makes, through go-tfe, the calls the tfe
// provider makes for a workspace's life against the real binaries: a
// project, a workspace created with the provider's defaults (refused while
// allow_destroy_plan keeps its default true, since Cairn never runs destroy
// plans), the read with effective tag bindings, remote-state consumers,
// links.self-html, update, workspace variables, a variable set, team
// access, and the safe delete the provider uses unless force_delete is set.
func TestProviderStyleWorkspaceLife(t *testing.T) {
	t.Parallel()
	s := StartStack(t)
	owner := s.newMember(t, "provider")
	ctx := t.Context()
	client, err := tfe.NewClient(&tfe.Config{Address: s.APIURL, Token: owner.token, HTTPClient: s.Client, RetryServerErrors: false})
	if err != nil {
		t.Fatal(err)
	}
	org := owner.slug

	project, err := client.Projects.Create(ctx, org, tfe.ProjectCreateOptions{Name: "platform"})
	if err != nil {
		t.Fatalf("project create: %v", err)
	}
	if project, err = client.Projects.Update(ctx, project.ID, tfe.ProjectUpdateOptions{Name: tfe.String("platform"), Description: tfe.String("shared")}); err != nil ||
		project.Description != "shared" {
		t.Fatalf("project update: %v %+v", err, project)
	}
	if read, err := client.Projects.Read(ctx, project.ID); err != nil || read.Name != "platform" {
		t.Fatalf("project read: %v %+v", err, read)
	}

	// The provider's default allow_destroy_plan = true is refused with the
	// fix, and creates nothing.
	_, err = client.Workspaces.Create(ctx, org, providerWorkspace("network", project.ID, true))
	if err == nil || !strings.Contains(err.Error(), "never runs destroy plans") || !strings.Contains(err.Error(), "to false") {
		t.Fatalf("create with allow_destroy_plan = true: %v", err)
	}
	if _, err := client.Workspaces.Read(ctx, org, "network"); !errors.Is(err, tfe.ErrResourceNotFound) {
		t.Fatalf("refused workspace read: %v", err)
	}

	ws, err := client.Workspaces.Create(ctx, org, providerWorkspace("network", project.ID, false))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if ws.AllowDestroyPlan || ws.Project == nil || ws.Project.ID != project.ID || ws.Name != "network" {
		t.Fatalf("created %+v", ws)
	}
	// The provider's read: include=effective_tag_bindings, then
	// links.self-html for html_url, and can-force-delete to choose a safe
	// delete.
	read, err := client.Workspaces.ReadByIDWithOptions(ctx, ws.ID, &tfe.WorkspaceReadOptions{Include: []tfe.WSIncludeOpt{tfe.WSEffectiveTagBindings}})
	if err != nil {
		t.Fatalf("read with effective tag bindings: %v", err)
	}
	if read.AllowDestroyPlan || read.Organization == nil || read.Organization.Name != org {
		t.Fatalf("read %+v", read)
	}
	if html, _ := read.Links["self-html"].(string); html != "/app/"+org+"/workspaces/network" {
		t.Fatalf("links.self-html = %v", read.Links)
	}
	if read.Permissions == nil || read.Permissions.CanForceDelete == nil || !*read.Permissions.CanForceDelete {
		t.Fatalf("permissions %+v", read.Permissions)
	}

	// Remote-state consumers, read when global_remote_state is false.
	app, err := client.Workspaces.Create(ctx, org, providerWorkspace("app", project.ID, false))
	if err != nil {
		t.Fatalf("create app: %v", err)
	}
	if err := client.Workspaces.AddRemoteStateConsumers(ctx, ws.ID, tfe.WorkspaceAddRemoteStateConsumersOptions{Workspaces: []*tfe.Workspace{{ID: app.ID}}}); err != nil {
		t.Fatalf("add consumers: %v", err)
	}
	consumers, err := client.Workspaces.ListRemoteStateConsumers(ctx, ws.ID, nil)
	if err != nil || len(consumers.Items) != 1 || consumers.Items[0].ID != app.ID {
		t.Fatalf("consumers: %v %+v", err, consumers)
	}

	// The provider's update sends every attribute again.
	update := tfe.WorkspaceUpdateOptions{
		Name: tfe.String("network"), AllowDestroyPlan: tfe.Bool(false), AutoApplyRunTrigger: tfe.Bool(false),
		FileTriggersEnabled: tfe.Bool(true), GlobalRemoteState: tfe.Bool(false), QueueAllRuns: tfe.Bool(true),
		SpeculativeEnabled: tfe.Bool(true), StructuredRunOutputEnabled: tfe.Bool(true), WorkingDirectory: tfe.String(""),
		TerraformVersion: tfe.String("1.10.6"), Project: &tfe.Project{ID: project.ID},
	}
	if updated, err := client.Workspaces.UpdateByID(ctx, ws.ID, update); err != nil || updated.TerraformVersion != "1.10.6" || updated.AllowDestroyPlan {
		t.Fatalf("update: %v %+v", err, updated)
	}
	update.AllowDestroyPlan = tfe.Bool(true)
	if _, err := client.Workspaces.UpdateByID(ctx, ws.ID, update); err == nil || !strings.Contains(err.Error(), "never runs destroy plans") {
		t.Fatalf("update to allow_destroy_plan = true: %v", err)
	}

	// A variable set with a variable, applied to the workspace.
	set, err := client.VariableSets.Create(ctx, org, &tfe.VariableSetCreateOptions{Name: tfe.String("shared"),
		Description: tfe.String("for every network"), Global: tfe.Bool(false), Priority: tfe.Bool(false)})
	if err != nil {
		t.Fatalf("variable set create: %v", err)
	}
	if _, err := client.VariableSetVariables.Create(ctx, set.ID, &tfe.VariableSetVariableCreateOptions{Key: tfe.String("owner"), Value: tfe.String("platform"),
		Category: tfe.Category(tfe.CategoryTerraform), HCL: tfe.Bool(false), Sensitive: tfe.Bool(false), Description: tfe.String("")}); err != nil {
		t.Fatalf("variable set variable create: %v", err)
	}
	if err := client.VariableSets.ApplyToWorkspaces(ctx, set.ID, &tfe.VariableSetApplyToWorkspacesOptions{Workspaces: []*tfe.Workspace{{ID: ws.ID}}}); err != nil {
		t.Fatalf("apply variable set: %v", err)
	}
	applied, err := client.VariableSets.Read(ctx, set.ID, &tfe.VariableSetReadOptions{Include: &[]tfe.VariableSetIncludeOpt{tfe.VariableSetWorkspaces}})
	if err != nil || len(applied.Workspaces) != 1 || applied.Workspaces[0].ID != ws.ID {
		t.Fatalf("variable set read: %v %+v", err, applied)
	}

	// Team access to the workspace.
	team, err := client.Teams.Create(ctx, org, tfe.TeamCreateOptions{Name: tfe.String("networkers")})
	if err != nil {
		t.Fatalf("team create: %v", err)
	}
	access, err := client.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessWrite), Team: team, Workspace: ws})
	if err != nil {
		t.Fatalf("team access add: %v", err)
	}
	if got, err := client.TeamAccess.Read(ctx, access.ID); err != nil || got.Access != tfe.AccessWrite || got.Team == nil || got.Team.ID != team.ID ||
		got.Workspace == nil || got.Workspace.ID != ws.ID {
		t.Fatalf("team access read: %v %+v", err, got)
	}

	// Safe delete: refused while locked and while the state manages a
	// resource; the provider checks the resource count first.
	if _, err := client.Workspaces.Lock(ctx, app.ID, tfe.WorkspaceLockOptions{Reason: tfe.String("provider e2e")}); err != nil {
		t.Fatalf("lock: %v", err)
	}
	if err := client.Workspaces.SafeDeleteByID(ctx, app.ID); !errors.Is(err, tfe.ErrWorkspaceLockedCannotDelete) {
		t.Fatalf("safe delete while locked: %v", err)
	}
	sum := md5.Sum([]byte(managedState))
	if _, err := client.StateVersions.Upload(ctx, app.ID, tfe.StateVersionUploadOptions{
		StateVersionCreateOptions: tfe.StateVersionCreateOptions{Serial: tfe.Int64(1), MD5: tfe.String(hex.EncodeToString(sum[:])), Lineage: tfe.String("provider-e2e")},
		RawState:                  []byte(managedState),
	}); err != nil {
		t.Fatalf("state upload: %v", err)
	}
	if _, err := client.Workspaces.Unlock(ctx, app.ID); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	if managed, err := client.Workspaces.ReadByID(ctx, app.ID); err != nil || managed.ResourceCount != 1 {
		t.Fatalf("resource count: %v %+v", err, managed)
	}
	if err := client.Workspaces.SafeDeleteByID(ctx, app.ID); !errors.Is(err, tfe.ErrWorkspaceNotSafeToDelete) {
		t.Fatalf("safe delete of a workspace managing resources: %v", err)
	}
	if err := client.Workspaces.SafeDeleteByID(ctx, ws.ID); err != nil {
		t.Fatalf("safe delete: %v", err)
	}
	if _, err := client.Workspaces.ReadByID(ctx, ws.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
		t.Fatalf("safe-deleted workspace read: %v", err)
	}
	list, err := client.Workspaces.List(ctx, org, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(list.Items))
	for i, w := range list.Items {
		names[i] = w.Name
	}
	if !slices.Equal(names, []string{"app"}) {
		t.Fatalf("workspaces left: %s", fmt.Sprint(names))
	}

	// Workspace variables (on the workspace that stays): a sensitive
	// value is never read back.
	region, err := client.Variables.Create(ctx, app.ID, tfe.VariableCreateOptions{Key: tfe.String("region"), Value: tfe.String("eu-west-1"),
		Category: tfe.Category(tfe.CategoryTerraform), HCL: tfe.Bool(false), Sensitive: tfe.Bool(false), Description: tfe.String("where")})
	if err != nil {
		t.Fatalf("variable create: %v", err)
	}
	secret, err := client.Variables.Create(ctx, app.ID, tfe.VariableCreateOptions{Key: tfe.String("API_KEY"), Value: tfe.String("provider-canary-0451"),
		Category: tfe.Category(tfe.CategoryEnv), HCL: tfe.Bool(false), Sensitive: tfe.Bool(true), Description: tfe.String("")})
	if err != nil || secret.Value != "" {
		t.Fatalf("sensitive variable create: %v %+v", err, secret)
	}
	if v, err := client.Variables.Read(ctx, app.ID, region.ID); err != nil || v.Value != "eu-west-1" || v.Category != tfe.CategoryTerraform || v.Description != "where" {
		t.Fatalf("variable read: %v %+v", err, v)
	}
	if v, err := client.Variables.Update(ctx, app.ID, region.ID, tfe.VariableUpdateOptions{Key: tfe.String("region"), Value: tfe.String("eu-central-1"),
		Description: tfe.String("where"), HCL: tfe.Bool(false), Sensitive: tfe.Bool(false)}); err != nil || v.Value != "eu-central-1" {
		t.Fatalf("variable update: %v %+v", err, v)
	}
	if v, err := client.Variables.Read(ctx, app.ID, secret.ID); err != nil || v.Value != "" || !v.Sensitive {
		t.Fatalf("sensitive variable read: %v %+v", err, v)
	}
}
