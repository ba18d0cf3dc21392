package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/seal"
	"github.com/cairnhq/cairn/api/platform/secret"
	"github.com/cairnhq/cairn/api/varset"
	"github.com/cairnhq/cairn/api/workspace"
	"github.com/cairnhq/cairn/e2e/devstack"
)

// Sizes of the varsets phase.
const (
	benchVarsetCount     = 20  // sets applying to the measured workspace
	benchVarsetVariables = 100 // variables per set, keys distinct across sets
	benchWorkspaceVars   = 100 // workspace variables of both workspaces
	benchSensitiveEvery  = 10  // every tenth variable is sensitive
	benchVarsetRuns      = 120 // runs created per workspace
	benchVarsetTargetMS  = 100.0
	benchVarsetRatio     = 2.0
	benchVarsetReads     = 60  // rounds of each read, per workspace
	benchVarsetReadRatio = 1.5 // a read of runs does not grow with what they pinned
)

// benchVarsets measures run creation (POST /v1/runs to its 201, which pins
// the effective variables and copies their values for the run) for a
// workspace that 20 variable sets of 100 variables each apply to (half
// through its project, half directly), against a workspace with only its
// own variables, in the same run. Both workspaces have the same 100
// workspace variables; every tenth variable is sensitive, so re-sealing
// is in both. The two kinds of creation alternate, so a burst of another
// process's load lands on both alike; each run is canceled (unmeasured)
// before the next, so the queue stays empty.
func benchVarsets(api *apiProcess, dbURL, session string) error {
	c := api.Client
	ctx := context.Background()
	conn, err := sqlx.Open("postgres", dbURL)
	if err != nil {
		return err
	}
	defer conn.Close()
	var owner access.Principal
	if err := conn.QueryRowxContext(ctx, `
		SELECT u.id, m.organization_id FROM users u JOIN memberships m ON m.user_id = u.id
		WHERE u.email = 'bench@example.com' AND m.role = 'owner'`).Scan(&owner.ID, &owner.OrganizationID); err != nil {
		return fmt.Errorf("finding the owner: %w", err)
	}
	owner.Kind, owner.Role, owner.Permissions = access.KindUser, access.RoleOwner, access.PermissionsOf(access.RoleOwner)

	// The same keys as the API's (startAPI's environment): the values are
	// sealed and digested exactly as the API would.
	keys := config.Config{AuthSecret: "bench-auth-secret-0123456789abcdef0123456789abcdef", MasterKey: "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="}
	masterKey, err := base64.StdEncoding.DecodeString(string(keys.MasterKey))
	if err != nil {
		return err
	}
	sealer, err := seal.NewSealer(masterKey)
	if err != nil {
		return err
	}
	digestKey := secret.Derive(keys.AuthSecret, "variable-digest")
	workspaces := workspace.NewService(conn, sealer, digestKey, []string{"1.10.6"})
	sets := varset.NewService(conn, sealer, digestKey)

	type side struct {
		name, project, workspace, cfg string
		created                       []float64
	}
	withSets, plain := &side{name: "varsets-applied"}, &side{name: "varsets-none"}
	start := time.Now()
	for _, sd := range []*side{withSets, plain} {
		var project, ws, cfg struct{ ID string }
		if _, err := v1(c, http.MethodPost, api.URL+"/v1/projects", session, jsonBody(map[string]string{"name": sd.name}), "application/json", &project); err != nil {
			return err
		}
		if _, err := v1(c, http.MethodPost, api.URL+"/v1/workspaces", session, jsonBody(map[string]any{"project_id": project.ID, "name": sd.name,
			"execution_settings": map[string]string{"tool_version": "1.10.6", "region": "us", "platform": "linux_amd64"}}), "application/json", &ws); err != nil {
			return err
		}
		sd.project, sd.workspace = project.ID, ws.ID
		if err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) error {
			for i := range benchWorkspaceVars {
				value := fmt.Sprintf("workspace-value-%d", i)
				if _, err := workspaces.CreateVariable(ctx, tx, owner, ws.ID, workspace.VariableInput{Key: fmt.Sprintf("ws_var_%d", i),
					Value: &value, Sensitive: i%benchSensitiveEvery == 0}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("seeding workspace variables: %w", err)
		}
		if _, err := v1(c, http.MethodPost, api.URL+"/v1/workspaces/"+ws.ID+"/configuration-versions", session,
			devstack.TarGz(map[string]string{"main.tf": `resource "terraform_data" "x" {}`}), "application/gzip", &cfg); err != nil {
			return err
		}
		sd.cfg = cfg.ID
	}
	for i := range benchVarsetCount {
		if err := db.WithTx(ctx, conn, func(tx *sqlx.Tx) error {
			name := fmt.Sprintf("bench-set-%02d", i)
			set, err := sets.Create(ctx, tx, owner, varset.SetInput{Name: &name})
			if err != nil {
				return err
			}
			if i%2 == 0 {
				_, err = sets.AddProjects(ctx, tx, owner, set.ID, []string{withSets.project})
			} else {
				_, err = sets.AddWorkspaces(ctx, tx, owner, set.ID, []string{withSets.workspace})
			}
			if err != nil {
				return err
			}
			for j := range benchVarsetVariables {
				value := fmt.Sprintf("set-%d-value-%d", i, j)
				category := workspace.CategoryTerraform
				if j%4 == 3 {
					category = workspace.CategoryEnv
				}
				if _, err := sets.CreateVariable(ctx, tx, owner, set.ID, varset.VariableInput{Key: fmt.Sprintf("set_%d_var_%d", i, j),
					Category: category, Value: &value, Sensitive: j%benchSensitiveEvery == 0}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("seeding variable set %d: %w", i, err)
		}
	}
	fmt.Printf("  varsets: seeded %d sets of %d variables and 2 x %d workspace variables through api/varset and api/workspace in %s\n",
		benchVarsetCount, benchVarsetVariables, benchWorkspaceVars, time.Since(start).Round(time.Millisecond))

	create := func(sd *side) (time.Duration, error) {
		var r struct{ ID string }
		t0 := time.Now()
		if _, err := v1(c, http.MethodPost, api.URL+"/v1/runs", session, jsonBody(map[string]string{"workspace_id": sd.workspace,
			"configuration_version_id": sd.cfg, "kind": "plan_and_apply"}), "application/json", &r); err != nil {
			return 0, err
		}
		elapsed := time.Since(t0)
		if _, err := v1(c, http.MethodPost, api.URL+"/v1/runs/"+r.ID+"/actions/cancel", session, nil, "", nil); err != nil {
			return 0, err
		}
		return elapsed, nil
	}
	for round := 0; round <= benchVarsetRuns; round++ {
		for _, sd := range []*side{withSets, plain} {
			d, err := create(sd)
			if err != nil {
				return err
			}
			if round > 0 { // round 0 warms both up
				sd.created = append(sd.created, ms64(d))
			}
		}
	}
	var pinned int
	if err := conn.GetContext(ctx, &pinned, `SELECT jsonb_array_length(input_snapshot->'variables') FROM runs
		WHERE workspace_id = $1 ORDER BY created_at DESC LIMIT 1`, withSets.workspace); err != nil {
		return fmt.Errorf("reading the pinned snapshot: %w", err)
	}
	want := benchWorkspaceVars + benchVarsetCount*benchVarsetVariables
	if pinned != want {
		return fmt.Errorf("a run of the workspace with sets pinned %d variables, want %d", pinned, want)
	}
	p50s, p99s := percentile(withSets.created, 0.5), percentile(withSets.created, 0.99)
	p50p, p99p := percentile(plain.created, 0.5), percentile(plain.created, 0.99)
	ratio := p50s / p50p
	verdict := "met"
	if ratio > benchVarsetRatio || p99s >= benchVarsetTargetMS {
		verdict = "MISSED"
	}
	fmt.Printf("run creation (POST /v1/runs), %d runs each, one client:\n", benchVarsetRuns)
	fmt.Printf("  workspace variables only (%d)                 p50 %6.2f ms  p99 %6.2f ms\n", benchWorkspaceVars, p50p, p99p)
	fmt.Printf("  + %d variable sets x %d variables (%d pinned)  p50 %6.2f ms  p99 %6.2f ms\n", benchVarsetCount, benchVarsetVariables,
		pinned, p50s, p99s)
	fmt.Printf("  varsets: p50 x%.2f, p99 x%.2f [target p50 ratio <= %.0f and p99 < %.0f ms: %s]\n", ratio, p99s/p99p,
		benchVarsetRatio, benchVarsetTargetMS, verdict)
	return benchVarsetReadsOf(api, session, withSets.workspace, plain.workspace)
}

// benchVarsetReadsOf measures what reading the runs just created costs:
// the workspace's first page of runs (20, each of which pinned 2,100
// variables on the one side) and a run's review, alternating between the
// two workspaces. Only the phase that resolves a run's inputs needs its
// variable references, so neither read should grow with them.
func benchVarsetReadsOf(api *apiProcess, session, withSets, plain string) error {
	type read struct {
		name string
		url  func(workspaceID, runID string) string
	}
	reads := []read{
		{"runs list (GET /v1/runs?workspace_id, 20)", func(ws, _ string) string {
			return api.URL + "/v1/runs?limit=20&workspace_id=" + ws
		}},
		{"run review (GET /v1/runs/{id})", func(_, runID string) string { return api.URL + "/v1/runs/" + runID }},
	}
	newest := map[string]string{}
	for _, ws := range []string{withSets, plain} {
		var page []struct{ ID string }
		if _, err := v1(api.Client, http.MethodGet, api.URL+"/v1/runs?limit=1&workspace_id="+ws, session, nil, "", &page); err != nil {
			return err
		}
		if len(page) != 1 {
			return fmt.Errorf("workspace %s lists %d runs", ws, len(page))
		}
		newest[ws] = page[0].ID
	}
	fmt.Printf("reading those runs, %d rounds each, one client:\n", benchVarsetReads)
	for _, rd := range reads {
		times := map[string][]float64{}
		for round := 0; round <= benchVarsetReads; round++ {
			for _, ws := range []string{withSets, plain} {
				t0 := time.Now()
				if _, err := v1(api.Client, http.MethodGet, rd.url(ws, newest[ws]), session, nil, "", nil); err != nil {
					return err
				}
				if round > 0 { // round 0 warms both up
					times[ws] = append(times[ws], ms64(time.Since(t0)))
				}
			}
		}
		with, without := percentile(times[withSets], 0.5), percentile(times[plain], 0.5)
		verdict := "met"
		if with/without > benchVarsetReadRatio {
			verdict = "MISSED"
		}
		fmt.Printf("  %-44s p50 %6.2f ms with the sets, %6.2f ms without: x%.2f [target <= %.1f: %s]\n", rd.name, with, without,
			with/without, benchVarsetReadRatio, verdict)
	}
	return nil
}
