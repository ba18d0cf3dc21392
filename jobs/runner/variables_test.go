package runner

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/platform/mask"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/workspace"
	"github.com/cairnhq/cairn/jobs/sandbox"
	"github.com/cairnhq/cairn/jobs/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { sandboxtest.Main(m.Run) }

// TestEnvVariablesReachTofuAndAreMasked runs the environment a tofu command
// gets in a real (unisolated) local sandbox: a variable set's env variables
// are there, over a credential's name, under the runner's own names; they
// stay out of the variables file; and a sensitive one is among the values
// the phase's log masks.
func TestEnvVariablesReachTofuAndAreMasked(t *testing.T) {
	t.Parallel()
	const secret = "env-secret-5c1e-masked"
	inputs := run.WithRunVariables([]workspace.ResolvedVariable{
		{Key: "region", Category: workspace.CategoryTerraform, Value: "eu-west-1"},
		{Key: "DB_PASSWORD", Category: workspace.CategoryEnv, Value: secret, Sensitive: true},
		{Key: "AWS_REGION", Category: workspace.CategoryEnv, Value: "from-the-set"},
		// Refused when written; the runner's own name wins regardless.
		{Key: "TFE_RUN_ID", Category: workspace.CategoryEnv, Value: "spoofed"},
	}, run.RunVariables{{Key: "region", Value: `"from the run"`}})

	env := &attemptEnv{st: run.Started{Run: run.Run{ID: "run_env"}},
		credentialEnv: map[string]string{"AWS_REGION": "from-the-credential", "CREDENTIAL_ONLY": "kept"},
		variableEnv:   variableEnvironment(inputs)}
	out := tofuEnvironment(t, sandbox.Spec{Name: "run_env-plan-1"}, env,
		`printf '%s|%s|%s|%s' "$DB_PASSWORD" "$AWS_REGION" "$CREDENTIAL_ONLY" "$TFE_RUN_ID"`)
	if got, want := out, secret+"|from-the-set|kept|run_env"; got != want {
		t.Fatalf("environment %q, want %q", got, want)
	}
	if vars := string(tfvars(inputs)); strings.Contains(vars, secret) || strings.Contains(vars, "AWS_REGION") ||
		strings.Contains(vars, "eu-west-1") || !strings.Contains(vars, "from the run") {
		t.Fatalf("variables file:\n%s", vars)
	}
	forms := mask.Forms(phaseSecrets("", inputs))
	if !mask.Contains(out, forms) || mask.Contains("from-the-set", forms) {
		t.Fatalf("masked forms %q", forms)
	}
}

// TestEnvVariablesNeverSetRunnerNames: a pinned env variable whose name the
// runner owns (stored before the name was refused) never reaches the
// command: not the sandbox-wide names the runner sets (GOMEMLIMIT,
// PLUGIN_UNIX_SOCKET_DIR) and not a proxy that would see the run token.
func TestEnvVariablesNeverSetRunnerNames(t *testing.T) {
	t.Parallel()
	inputs := []workspace.ResolvedVariable{
		{Key: "GOMEMLIMIT", Category: workspace.CategoryEnv, Value: "spoofed"},
		{Key: "PLUGIN_UNIX_SOCKET_DIR", Category: workspace.CategoryEnv, Value: "spoofed"},
		{Key: "HTTPS_PROXY", Category: workspace.CategoryEnv, Value: "http://attacker.example:3128"},
		{Key: "AWS_REGION", Category: workspace.CategoryEnv, Value: "kept"},
	}
	env := &attemptEnv{st: run.Started{Run: run.Run{ID: "run_owned"}}, variableEnv: variableEnvironment(inputs)}
	out := tofuEnvironment(t, sandbox.Spec{Name: "run_owned-plan-1",
		Env: map[string]string{"GOMEMLIMIT": "1000", "PLUGIN_UNIX_SOCKET_DIR": "/tmp"}}, env,
		`printf '%s|%s|%s|%s' "$GOMEMLIMIT" "$PLUGIN_UNIX_SOCKET_DIR" "$HTTPS_PROXY" "$AWS_REGION"`)
	if got, want := out, "1000|/tmp||kept"; got != want {
		t.Fatalf("environment %q, want %q", got, want)
	}
}

// tofuEnvironment runs script in place of tofu, with the environment a
// tofu command of env gets in a real (unisolated) local sandbox of spec,
// and returns its output.
func tofuEnvironment(t *testing.T, spec sandbox.Spec, env *attemptEnv, script string) string {
	t.Helper()
	d, err := sandbox.NewLocal(t.TempDir(), sandbox.LocalOptions{Base: sandboxtest.Base(), Isolation: sandbox.NoIsolation})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := d.Create(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
	if err := os.MkdirAll(filepath.Join(sb.WorkDir(), configDir), 0o700); err != nil {
		t.Fatal(err)
	}
	env.sb = sb
	var out bytes.Buffer
	cmd := (&Runner{}).tofuCommand(env, &out, "version")
	cmd.Args = []string{"sh", "-c", script}
	cmd.Stderr = &out
	if code, err := sb.Run(context.Background(), cmd); err != nil || code != 0 {
		t.Fatalf("command: %d %v: %s", code, err, out.String())
	}
	return out.String()
}
