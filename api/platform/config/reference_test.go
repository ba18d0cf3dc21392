package config

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/reference/configuration.md from the code")

// repoRoot is the module root, three levels above this package.
const repoRoot = "../../.."

const referencePath = repoRoot + "/docs/reference/configuration.md"

// otherSetting is an environment variable read outside Config: by a
// library convention (SSL_CERT_FILE) or by the development commands.
type otherSetting struct {
	name, fallback, processes, meaning string
}

// outsideConfig are the variables production code reads directly with
// os.Getenv; TestEveryEnvironmentVariableIsDocumented finds them.
var outsideConfig = []otherSetting{
	{"SSL_CERT_FILE", "the system roots", "api (bootstrap), worker",
		"A CA bundle, the standard OpenSSL/Go variable. `cairn-api bootstrap` trusts it when it calls an `https` API; a worker uses it as `CAIRN_RUNNER_CA_FILE` when that is unset. `make run` points it at `.data/tls/bundle.pem`."},
	{"SSL_CERT_DIR", "`/etc/ssl/certs`", "worker",
		"Certificate directories the worker folds into the one bundle sandboxed commands trust (`$CAIRN_DATA_DIR/runner-trust.pem`)."},
}

// developmentOnly are the variables of `make run`, `make test` and
// `make fuzz` (e2e/cmd/cairn-dev and e2e/devstack), never of a deployed
// process.
var developmentOnly = []otherSetting{
	{"CAIRN_DEV_PG_PORT", "`54329`", "make run, make test", "Port of the private PostgreSQL cluster `make run` starts under `.data/postgres`."},
	{"CAIRN_PG_BIN", "found under `/usr/lib/postgresql/*/bin` or on `PATH`", "make run, make test", "Directory of the PostgreSQL server binaries (`initdb`, `postgres`)."},
	{"CAIRN_BIN_DIR", "`bin/`", "make run, make test", "Where `cairn-dev` finds the binaries it starts."},
	{"CAIRN_CHROMIUM", "`chromium`, `chromium-browser` or `google-chrome` on `PATH`", "make test", "The browser the dashboard's end-to-end tests drive (`make deps-test` installs Debian's `chromium`)."},
	{"FUZZTIME", "`30s`", "make fuzz", "How long `make fuzz` runs each fuzz target."},
}

// TestConfigurationReferenceIsCurrent regenerates the configuration
// reference from Config (names, types, defaults), the validation in
// config.go and settingDocs, and compares it with the committed page:
// adding, renaming or re-defaulting a setting without the page fails here.
// go test ./api/platform/config -run TestConfigurationReference -update
// rewrites it.
func TestConfigurationReferenceIsCurrent(t *testing.T) {
	t.Parallel()
	got, err := renderReference()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(referencePath, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("docs/reference/configuration.md is not what the code says; regenerate it with\n" +
			"  go test ./api/platform/config -run TestConfigurationReference -update")
	}
}

// configField is one Config field as the environment sees it.
type configField struct {
	name, goType, fallback, separator string
	secret                            bool
}

func configFields() []configField {
	var out []configField
	typ := reflect.TypeOf(Config{})
	for i := range typ.NumField() {
		f := typ.Field(i)
		name := f.Tag.Get("env")
		if name == "" {
			continue
		}
		def, _ := f.Tag.Lookup("envDefault")
		out = append(out, configField{
			name: name, goType: f.Type.String(), fallback: def,
			separator: f.Tag.Get("envSeparator"), secret: f.Type == reflect.TypeOf(Secret("")),
		})
	}
	return out
}

// validationRules reads config.go and returns, per variable, the messages
// with which LoadFrom refuses a value: the rules as the code states them.
func validationRules(names []string) (map[string][]string, error) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "config.go", nil, 0)
	if err != nil {
		return nil, err
	}
	rules := map[string][]string{}
	add := func(name, msg string) {
		msg = strings.NewReplacer("%w", "…", "%q", "…", "%s", "…", "%d", "…").Replace(msg)
		if !slices.Contains(rules[name], msg) {
			rules[name] = append(rules[name], msg)
		}
	}
	literal := func(n ast.Node) (string, bool) {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(lit.Value)
		return s, err == nil
	}
	for _, decl := range file.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || (fn.Name.Name != "validate" && fn.Name.Name != "validateSandbox") {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			// for name, raw := range map[string]string{"NAME": …} { … "%s must …" … }
			if r, ok := n.(*ast.RangeStmt); ok {
				if lit, ok := r.X.(*ast.CompositeLit); ok {
					var keys []string
					for _, e := range lit.Elts {
						if kv, ok := e.(*ast.KeyValueExpr); ok {
							if k, ok := literal(kv.Key); ok {
								keys = append(keys, k)
							}
						}
					}
					ast.Inspect(r.Body, func(m ast.Node) bool {
						if s, ok := literal(m); ok && strings.HasPrefix(s, "%s ") {
							for _, k := range keys {
								add(k, k+s[2:])
							}
						}
						return true
					})
				}
				return true
			}
			s, ok := literal(n)
			if !ok || slices.Contains(names, s) {
				return true
			}
			for _, name := range names {
				if mentions(s, name) {
					add(name, s)
				}
			}
			return true
		})
	}
	return rules, nil
}

// mentions reports whether a message names the variable, directly or
// through a wildcard such as CAIRN_ARGON2_*.
func mentions(msg, name string) bool {
	if regexp.MustCompile(`\b` + name + `\b`).MatchString(msg) {
		return true
	}
	for _, m := range regexp.MustCompile(`\b([A-Z0-9_]+_)\*`).FindAllStringSubmatch(msg, -1) {
		if strings.HasPrefix(name, m[1]) {
			return true
		}
	}
	return false
}

func renderReference() ([]byte, error) {
	fields := configFields()
	var names []string
	for _, f := range fields {
		names = append(names, f.name)
	}
	var problems []string
	for _, name := range names {
		if _, ok := settingDocs[name]; !ok {
			problems = append(problems, name+" is a Config field without an entry in settingDocs")
		}
	}
	for name := range settingDocs {
		if !slices.Contains(names, name) {
			problems = append(problems, name+" is documented in settingDocs but Config has no such field")
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return nil, fmt.Errorf("%s", strings.Join(problems, "\n"))
	}
	rules, err := validationRules(names)
	if err != nil {
		return nil, err
	}

	var b bytes.Buffer
	b.WriteString(`<!-- Generated by api/platform/config/reference_test.go from the Config struct, its validation and
     settingDocs. Do not edit: change the code, then run
     go test ./api/platform/config -run TestConfigurationReference -update -->

# Configuration reference

Every Cairn process (` + "`cairn-api`, `cairn-worker`, `cairn-bff`, `cairn-mcp`" + `) reads its settings from the
environment once, at start. A value that fails validation stops the process at start with the message shown
here. Secrets have no defaults: a missing or weak one makes the surface that needs it fail closed (` + "`503`" + `),
never fall back. Secret values never appear in logs, errors or ` + "`/health`" + ` (which reports only whether each
binding is configured).

Where to start: [deployment topologies](../operating/deployment.md) lists what each topology must set, and
[secrets and key rotation](../operating/secrets.md) how to generate the secrets.

| Variable | Default | Read by |
| --- | --- | --- |
`)
	for _, f := range fields {
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s | %s |\n", f.name, strings.ToLower(f.name), defaultText(f), settingDocs[f.name].processes)
	}
	b.WriteString("\n## Settings\n")
	for _, f := range fields {
		doc := settingDocs[f.name]
		fmt.Fprintf(&b, "\n### `%s`\n\n", f.name)
		fmt.Fprintf(&b, "- Default: %s\n", defaultText(f))
		fmt.Fprintf(&b, "- Read by: %s\n", doc.processes)
		kind := "`" + f.goType + "`"
		switch {
		case f.secret:
			kind = "secret (never printed)"
		case f.separator != "":
			kind = "list, separated by `" + f.separator + "`"
		case f.goType == "time.Duration":
			kind = "duration (`300ms`, `5m`, `168h`)"
		}
		fmt.Fprintf(&b, "- Type: %s\n", kind)
		if rs := rules[f.name]; len(rs) > 0 {
			b.WriteString("- Refused at start with:")
			for _, r := range rs {
				fmt.Fprintf(&b, " `%s`;", r)
			}
			b.Truncate(b.Len() - 1)
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "\n%s\n", doc.meaning)
	}
	b.WriteString("\n## Read outside the configuration\n\nStandard variables some processes read directly.\n\n")
	b.WriteString("| Variable | Default | Read by | Meaning |\n| --- | --- | --- | --- |\n")
	for _, s := range outsideConfig {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", s.name, s.fallback, s.processes, s.meaning)
	}
	b.WriteString("\n## Development commands\n\nRead by `cairn-dev` (`make run`, `make test`, `make fuzz`), never by a deployed process.\n\n")
	b.WriteString("| Variable | Default | Read by | Meaning |\n| --- | --- | --- | --- |\n")
	for _, s := range developmentOnly {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", s.name, s.fallback, s.processes, s.meaning)
	}
	b.WriteString("\nVariables named `CAIRN_TEST_*` are set by the test runner (`./bin/cairn-dev test`) for the test\n" +
		"helpers (`dbtest`, `blobtest`, `sandboxtest`) and are not settings.\n")
	return b.Bytes(), nil
}

func defaultText(f configField) string {
	if f.fallback == "" {
		return "—"
	}
	return "`" + f.fallback + "`"
}

// TestEveryEnvironmentVariableIsDocumented reads every non-test Go file of
// the processes (api, jobs, bff) and of the development commands for the
// variables they read — os.Getenv and os.LookupEnv with a constant name,
// and env struct tags — and fails for any the reference does not name.
func TestEveryEnvironmentVariableIsDocumented(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]string{} // name → where
	for _, dir := range []string{"api", "jobs", "bff", "e2e/cmd/cairn-dev", "e2e/devstack"} {
		// The processes must name what they read; the development commands
		// also pass names through helpers (envOr, envDuration), whose
		// callers name them.
		strict := !strings.HasPrefix(dir, "e2e/")
		if err := scanEnvironmentReads(filepath.Join(repoRoot, dir), strict, read); err != nil {
			t.Fatal(err)
		}
	}
	// The scan must see what it is meant to see, or it proves nothing.
	for _, known := range []string{"DATABASE_URL", "CAIRN_SANDBOX_ISOLATION", "SSL_CERT_DIR", "CAIRN_PG_BIN"} {
		if _, ok := read[known]; !ok {
			t.Errorf("the scan did not find %s; it would miss undocumented variables too", known)
		}
	}
	for name, where := range read {
		if strings.HasPrefix(name, "CAIRN_TEST_") || name == "PATH" {
			continue // the test runner's, and the one every program reads
		}
		if !bytes.Contains(page, []byte("`"+name+"`")) {
			t.Errorf("%s reads %s, which docs/reference/configuration.md does not name: add it to Config "+
				"(and settingDocs) or to outsideConfig/developmentOnly in reference_test.go, then regenerate", where, name)
		}
	}
}

var envTag = regexp.MustCompile(`env:"([A-Za-z0-9_]+)"`)

func scanEnvironmentReads(root string, strict bool, read map[string]string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return scanPackage(path, strict, read)
		}
		return nil
	})
}

func scanPackage(dir string, strict bool, read map[string]string) error {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var files []*ast.File
	consts := map[string]string{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			return err
		}
		files = append(files, f)
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							consts[n.Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			}
		}
	}
	var problem error
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Field:
				if n.Tag != nil {
					for _, m := range envTag.FindAllStringSubmatch(n.Tag.Value, -1) {
						read[m[1]] = fset.Position(n.Pos()).String()
					}
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok || (sel.Sel.Name != "Getenv" && sel.Sel.Name != "LookupEnv") || len(n.Args) != 1 {
					return true
				}
				if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "os" {
					return true
				}
				where := fset.Position(n.Pos()).String()
				switch arg := n.Args[0].(type) {
				case *ast.BasicLit:
					name, _ := strconv.Unquote(arg.Value)
					read[name] = where
				case *ast.Ident:
					if name, ok := consts[arg.Name]; ok {
						read[name] = where
					} else if strict {
						problem = fmt.Errorf("%s: os.%s(%s) reads a variable this test cannot name; use a constant", where, sel.Sel.Name, arg.Name)
					}
				default:
					if strict {
						problem = fmt.Errorf("%s: os.%s with a computed name; use a constant", where, sel.Sel.Name)
					}
				}
			}
			return true
		})
	}
	return problem
}
