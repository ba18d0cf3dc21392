package registry_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/registry"
	"github.com/cairnhq/cairn/api/registry/registrytest"
)

// TestHostileConfigurationIsRefusedBeforeItIsParsed: the facts are read
// in the API's own process, where HCL's recursive parser would spend a
// gigabyte of stack on 40,000 nested brackets and crash the process
// outright on 80,000 (a 160 KB file). Configuration nesting too deeply,
// in any syntax, or too large, errors the version before it is parsed;
// ordinary deep and long configuration still publishes.
func TestHostileConfigurationIsRefusedBeforeItIsParsed(t *testing.T) {
	t.Parallel()
	e := setup(t)
	m := e.module(t, "network")
	const n = 600
	local := func(expr string) map[string]string {
		return map[string]string{"main.tf": "locals {\n  x = " + expr + "\n}\n"}
	}
	deep := strings.Repeat("[", n) + strings.Repeat("]", n)
	big := "# " + strings.Repeat("x", 1<<20) + "\n"
	spread := map[string]string{"main.tf": "locals {}\n"}
	for i := range 9 {
		spread[fmt.Sprintf("modules/m%d/main.tf", i)] = "# " + strings.Repeat("x", 1<<20-100) + "\n"
	}
	var version int
	for name, tc := range map[string]struct {
		files map[string]string
		code  string
	}{
		"brackets":          {local(deep), registry.CodeConfigTooDeep},
		"parentheses":       {local(strings.Repeat("(", n) + "1" + strings.Repeat(")", n)), registry.CodeConfigTooDeep},
		"negations":         {local(strings.Repeat("!", n) + "true"), registry.CodeConfigTooDeep},
		"a binary chain":    {local("(1" + strings.Repeat(" +\n 1", n) + ")"), registry.CodeConfigTooDeep},
		"conditionals":      {local(strings.Repeat("true ? 1 : ", n) + "2"), registry.CodeConfigTooDeep},
		"interpolations":    {local(strings.Repeat(`"${`, n) + "1" + strings.Repeat(`}"`, n)), registry.CodeConfigTooDeep},
		"directives":        {local(`"` + strings.Repeat("%{ if true }", n) + "x" + strings.Repeat("%{ endif }", n) + `"`), registry.CodeConfigTooDeep},
		"blocks":            {map[string]string{"main.tf": strings.Repeat("dynamic \"x\" {\n", n) + strings.Repeat("}\n", n)}, registry.CodeConfigTooDeep},
		"json arrays":       {map[string]string{"main.tf.json": `{"locals": {"x": ` + deep + `}}`}, registry.CodeConfigTooDeep},
		"a json template":   {map[string]string{"main.tf.json": `{"locals": {"x": "${` + deep + `}"}}`}, registry.CodeConfigTooDeep},
		"a tofu file":       {map[string]string{"main.tofu": "locals {\n  x = " + deep + "\n}\n"}, registry.CodeConfigTooDeep},
		"a submodule":       {map[string]string{"main.tf": "locals {}\n", "modules/sub/main.tf": "locals {\n  x = " + deep + "\n}\n"}, registry.CodeConfigTooDeep},
		"a large file":      {map[string]string{"main.tf": big}, registry.CodeConfigTooLarge},
		"many large files":  {spread, registry.CodeConfigTooLarge},
		"ordinary, at size": {ordinaryConfiguration(n), ""},
	} {
		version++
		v := e.publish(t, m.ID, fmt.Sprintf("1.0.%d", version), registrytest.Archive(t, tc.files))
		switch {
		case tc.code == "" && v.Status != registry.VersionOK:
			t.Errorf("%s: %s %v %v", name, v.Status, deref(v.ErrorCode), deref(v.ErrorMessage))
		case tc.code != "" && (v.Status != registry.VersionErrored || deref(v.ErrorCode) != tc.code || v.ErrorMessage == nil):
			t.Errorf("%s: %s %v %v, want errored %s", name, v.Status, deref(v.ErrorCode), deref(v.ErrorMessage), tc.code)
		}
	}
}

// ordinaryConfiguration is long but shallow configuration: a list of n
// items, each an expression with operators, a heredoc with n
// interpolations and n sequential directives, and blocks nested a few
// levels.
func ordinaryConfiguration(n int) map[string]string {
	var b strings.Builder
	b.WriteString("locals {\n  items = [\n")
	for i := range n {
		fmt.Fprintf(&b, "    %d + 1 - 2 * 3 > 4 ? \"a\" : !true ? \"b\" : \"c\",\n", i)
	}
	b.WriteString("  ]\n  text = <<-EOT\n")
	for i := range n {
		fmt.Fprintf(&b, "    line ${%d + 1} %%{ if true }yes%%{ else }no%%{ endif }\n", i)
	}
	b.WriteString("  EOT\n}\n")
	b.WriteString("resource \"terraform_data\" \"x\" {\n  lifecycle {\n    precondition {\n      condition     = (1 + (2 * (3 - 1))) > 0\n      error_message = \"${upper(\"x\")}\"\n    }\n  }\n}\n")
	return map[string]string{"main.tf": b.String(), "main.tf.json": `{"output": {"y": {"value": "${[[[1]]]}"}}}`}
}
