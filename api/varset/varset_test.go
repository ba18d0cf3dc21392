package varset

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/workspace"
)

func setValue(setName, scope string, priority bool) workspace.PinnableVariable {
	return workspace.PinnableVariable{ID: "vsv_" + setName + "_" + scope, Key: "region", Category: workspace.CategoryTerraform,
		Source: workspace.SourceVariableSet, SetID: "varset_" + setName, SetName: setName, Scope: scope, Priority: priority}
}

// TestPrecedence removes the winner of a full candidate list tier by tier:
// each time the next tier of Cairn's order (README "Variable sets") wins.
// Run variables (tier 4) are applied on top by run.WithRunVariables.
func TestPrecedence(t *testing.T) {
	t.Parallel()
	ordered := []workspace.PinnableVariable{
		setValue("prio-global", ScopeGlobal, true),
		setValue("prio-project", ScopeProject, true),
		setValue("prio-workspace", ScopeWorkspace, true),
		{ID: "var_ws", Key: "region", Category: workspace.CategoryTerraform, Source: workspace.SourceWorkspace},
		setValue("ws-set", ScopeWorkspace, false),
		setValue("project-set", ScopeProject, false),
		setValue("global-set", ScopeGlobal, false),
	}
	wantTiers := []int{1, 2, 3, 5, 6, 7, 8}
	for i := range ordered {
		if got := Tier(ordered[i].Source, ordered[i].Scope, ordered[i].Priority); got != wantTiers[i] {
			t.Errorf("tier of %s: %d, want %d", ordered[i].ID, got, wantTiers[i])
		}
		// Candidates come from the query in no particular order.
		var cands []workspace.PinnableVariable
		for j := len(ordered) - 1; j >= i; j-- {
			cands = append(cands, ordered[j])
		}
		won := winners(resolve(cands))
		if len(won) != 1 || won[0].ID != ordered[i].ID {
			t.Errorf("with tiers %v left: winner %+v, want %s", wantTiers[i:], won, ordered[i].ID)
		}
	}
}

// TestSameTierAndScopes checks the rules beside the tiers: within a tier
// the set whose name sorts first in byte order wins (upper case before
// lower case), a set applying by several scopes competes at its best one,
// and terraform and env keys never compete.
func TestSameTierAndScopes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		cands []workspace.PinnableVariable
		want  string
	}{
		{"byte order", []workspace.PinnableVariable{setValue("alpha", ScopeGlobal, false), setValue("Zeta", ScopeGlobal, false)}, "vsv_Zeta_global"},
		{"name order", []workspace.PinnableVariable{setValue("b", ScopeProject, true), setValue("a", ScopeProject, true)}, "vsv_a_project"},
		{"tier before name", []workspace.PinnableVariable{setValue("a", ScopeProject, false), setValue("b", ScopeWorkspace, false)}, "vsv_b_workspace"},
	} {
		won := winners(resolve(tc.cands))
		if len(won) != 1 || won[0].ID != tc.want {
			t.Errorf("%s: winner %+v, want %s", tc.name, won, tc.want)
		}
	}

	// One set reaching the workspace through its project and directly is
	// one candidate, at the workspace tier (6), which beats a project set
	// named earlier.
	both := setValue("z", ScopeProject, false)
	direct := both
	direct.Scope = ScopeWorkspace
	other := setValue("a", ScopeProject, false)
	resolved := resolve([]workspace.PinnableVariable{both, other, direct})
	if len(resolved) != 2 || resolved[0].SetName != "z" || resolved[0].Scope != ScopeWorkspace {
		t.Fatalf("a set by two scopes: %+v", resolved)
	}

	env := setValue("env-set", ScopeGlobal, false)
	env.ID, env.Category = "vsv_env", workspace.CategoryEnv
	ws := workspace.PinnableVariable{ID: "var_ws", Key: "region", Category: workspace.CategoryTerraform, Source: workspace.SourceWorkspace}
	won := winners(resolve([]workspace.PinnableVariable{ws, env}))
	if len(won) != 2 || won[0].ID != "vsv_env" || won[1].ID != "var_ws" {
		t.Fatalf("env and terraform compete: %+v", won)
	}
}

func TestValidateVariable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		key, category string
		hcl           bool
		ok            bool
	}{
		{"region", "terraform", true, true},
		{"my-var", "terraform", false, true},
		{"AWS_REGION", "env", false, true},
		{"TF_VAR_region", "env", false, true},
		{"AWS_REGION", "env", true, false},
		{"my-var", "env", false, false},
		// A digit-leading key is stored, as HCP stores it (go-tfe writes
		// UUIDs); runs leave it out. An env key never starts with one.
		{"1x", "terraform", false, true},
		{"1X", "env", false, false},
		{"-x", "terraform", false, false},
		{"x", "secret", false, false},
		{"TF_CLI_CONFIG_FILE", "env", false, false},
		{"TFE_RUN_ID", "env", false, false},
		{"SSL_CERT_FILE", "env", false, false},
		{"SSL_CERT_DIR", "env", false, false},
		{"PATH", "env", false, false},
		{"HOME", "env", false, false},
		{"LD_PRELOAD", "env", false, false},
		{"ld_library_path", "env", false, false},
		{"TF_CLI_ARGS_plan", "env", false, false},
		{"TF_DATA_DIR", "env", false, false},
		{"TF_PLUGIN_CACHE_DIR", "env", false, false},
		{"TF_TOKEN_app_terraform_io", "env", false, false},
		{"CAIRN_MASTER_KEY", "env", false, false},
		{"TF_LOG_PATH", "env", false, false},
		{"TF_INPUT", "env", false, false},
		{"TF_IN_AUTOMATION", "env", false, false},
		{"AWS_WEB_IDENTITY_TOKEN_FILE", "env", false, false},
		// Names that redirect the run's credentials, state or trust, or
		// that the runner sets for the sandbox.
		{"HTTPS_PROXY", "env", false, false},
		{"https_proxy", "env", false, false},
		{"HTTP_PROXY", "env", false, false},
		{"ALL_PROXY", "env", false, false},
		{"NO_PROXY", "env", false, false},
		{"SSL_CERT_FILE_EXTRA", "env", false, false},
		{"SSLKEYLOGFILE", "env", false, false},
		{"CURL_CA_BUNDLE", "env", false, false},
		{"GIT_SSL_NO_VERIFY", "env", false, false},
		{"GIT_CONFIG_COUNT", "env", false, false},
		{"GODEBUG", "env", false, false},
		{"GOMEMLIMIT", "env", false, false},
		{"GOGC", "env", false, false},
		{"PLUGIN_UNIX_SOCKET_DIR", "env", false, false},
		{"TERRAFORM_CONFIG", "env", false, false},
		{"XDG_DATA_HOME", "env", false, false},
		{"XDG_CONFIG_HOME", "env", false, false},
		{"OPENTOFU_STATEFILE_PROVIDER_ADDRESS_TRANSLATION", "env", false, false},
		{"TOFU_CLI_CONFIG_FILE", "env", false, false},
		{"TF_REGISTRY_DISCOVERY_RETRY", "env", false, false},
		{"TF_WORKSPACE", "env", false, false},
		{"AWS_ENDPOINT_URL", "env", false, false},
		{"AWS_ENDPOINT_URL_STS", "env", false, false},
		{"AWS_CA_BUNDLE", "env", false, false},
		{"AZURE_AUTHORITY_HOST", "env", false, false},
		{"ARM_METADATA_HOSTNAME", "env", false, false},
		{"BASH_ENV", "env", false, false},
		{"ENV", "env", false, false},
		{"NODE_OPTIONS", "env", false, true},
		{"AWS_PROFILE", "env", false, true},
	} {
		err := validateVariable(tc.key, tc.category, tc.hcl)
		if (err == nil) != tc.ok {
			t.Errorf("%s (%s, hcl %v): %v, want ok %v", tc.key, tc.category, tc.hcl, err, tc.ok)
		}
		if err != nil && !errors.Is(err, fault.ErrValidation) {
			t.Errorf("%s: %v is not a validation error", tc.key, err)
		}
	}
}

func TestValidateSetFields(t *testing.T) {
	t.Parallel()
	long := func(n int) string { return fmt.Sprintf("%0*d", n, 0) }
	if _, err := validateDescription(long(512)); err != nil {
		t.Errorf("512 characters: %v", err)
	}
	if _, err := validateDescription(long(513)); !errors.Is(err, fault.ErrValidation) {
		t.Errorf("513 characters: %v", err)
	}
	if _, err := validateName(long(129)); err == nil {
		t.Error("a 129-character name passed")
	}
	if _, err := validateName("  "); err == nil {
		t.Error("a blank name passed")
	}
}
