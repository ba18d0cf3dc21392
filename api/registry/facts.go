package registry

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/terraform-config-inspect/tfconfig"
)

// Facts is what a version's archive says about the module, read once when
// it is published and stored as JSON.
type Facts struct {
	// README is the root README.md as raw markdown ("" when absent or
	// over MaxReadmeBytes); renderers must treat it as untrusted.
	README     string      `json:"readme"`
	Inputs     []Input     `json:"inputs"`
	Outputs    []Output    `json:"outputs"`
	Resources  []Resource  `json:"resources"`
	Providers  []Provider  `json:"providers"`
	Submodules []Submodule `json:"submodules"`
}

// Input is a variable of the module.
type Input struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Description string `json:"description"`
	// Default is the default value as JSON, null when there is none.
	Default   json.RawMessage `json:"default"`
	Required  bool            `json:"required"`
	Sensitive bool            `json:"sensitive"`
}

// Output is an output value of the module.
type Output struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Sensitive   bool   `json:"sensitive"`
}

// Resource is a managed or data resource the module declares.
type Resource struct {
	Type string `json:"type"`
	Name string `json:"name"`
	Mode string `json:"mode"` // managed | data
}

// Provider is a provider the module requires.
type Provider struct {
	Name               string   `json:"name"`
	Source             string   `json:"source"`
	VersionConstraints []string `json:"version_constraints"`
}

// Submodule is a module under modules/ in the archive.
type Submodule struct {
	Path      string     `json:"path"`
	Inputs    []Input    `json:"inputs"`
	Outputs   []Output   `json:"outputs"`
	Resources []Resource `json:"resources"`
}

// Bounds on what is read from an archive.
const (
	MaxReadmeBytes = 256 << 10
	maxSubmodules  = 100
	// maxFactItems bounds each list of one module (inputs, outputs,
	// resources, providers), so a stored version's facts stay small.
	maxFactItems = 1000
	// maxFactText bounds each description and type kept.
	maxFactText = 4096
	// maxDefaultBytes bounds a default value kept; a longer one is
	// reported as null.
	maxDefaultBytes = 16 << 10
)

// Codes of versions refused after their archive passed the archive rules.
const (
	CodeNoConfiguration = "module_no_configuration"
	CodeInvalidConfig   = "module_configuration_invalid"
)

// factsError is why the facts could not be read from a well-formed
// archive: the version is errored with the code and a safe message.
type factsError struct{ code, message string }

func (e *factsError) Error() string { return e.code + ": " + e.message }

// readFacts reads a module's facts from its extracted archive rooted at
// root. A root without configuration files (.tf, .tf.json, .tofu,
// .tofu.json) is refused.
func readFacts(root *os.Root) (Facts, error) {
	fsys := root.FS()
	if !hasConfiguration(fsys, ".") {
		return Facts{}, &factsError{CodeNoConfiguration, "the module's root directory has no .tf or .tofu file"}
	}
	budget := newConfigBudget()
	if err := budget.check(tofuFS{fsys}, "."); err != nil {
		return Facts{}, err
	}
	mod, invalid := loadModule(tofuFS{fsys}, ".")
	if invalid {
		return Facts{}, &factsError{CodeInvalidConfig, "the module's root configuration does not parse"}
	}
	f := Facts{Inputs: inputsOf(mod), Outputs: outputsOf(mod), Resources: resourcesOf(mod), Providers: providersOf(mod),
		Submodules: []Submodule{}}
	f.README = readmeOf(fsys)
	subs, err := fs.ReadDir(fsys, "modules")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Facts{}, fmt.Errorf("reading submodules: %w", err)
	}
	for _, e := range subs {
		dir := path.Join("modules", e.Name())
		if !e.IsDir() || !hasConfiguration(fsys, dir) || len(f.Submodules) == maxSubmodules {
			continue
		}
		if err := budget.check(tofuFS{fsys}, dir); err != nil {
			return Facts{}, err
		}
		sub, invalid := loadModule(tofuFS{fsys}, dir)
		if invalid {
			return Facts{}, &factsError{CodeInvalidConfig, fmt.Sprintf("submodule %s does not parse", clip(e.Name(), 64))}
		}
		f.Submodules = append(f.Submodules, Submodule{Path: dir, Inputs: inputsOf(sub), Outputs: outputsOf(sub), Resources: resourcesOf(sub)})
	}
	return f, nil
}

// loadModule reads one directory's configuration. The library panics on
// some input it cannot re-encode (a default nested past encoding/json's
// depth limit, which configBudget already refuses); a panic is treated as
// configuration that does not parse, so a hostile archive ends its version
// errored instead of failing the request or the ingestion job forever.
func loadModule(fsys tofuFS, dir string) (mod *tfconfig.Module, invalid bool) {
	defer func() {
		if recover() != nil {
			mod, invalid = nil, true
		}
	}()
	m, diags := tfconfig.LoadModuleFromFilesystem(fsys, dir)
	return m, diags.HasErrors()
}

func readmeOf(fsys fs.FS) string {
	file, err := fsys.Open("README.md")
	if err != nil {
		return ""
	}
	defer file.Close()
	raw, err := io.ReadAll(io.LimitReader(file, MaxReadmeBytes+1))
	if err != nil || len(raw) > MaxReadmeBytes || !utf8.Valid(raw) {
		return ""
	}
	return string(raw)
}

// hasConfiguration reports whether dir holds a configuration file
// OpenTofu would read.
func hasConfiguration(fsys fs.FS, dir string) bool {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(entries, func(e fs.DirEntry) bool {
		_, ok := tfName(e.Name())
		return ok && e.Type().IsRegular()
	})
}

// tfName maps an OpenTofu configuration file name to the name
// terraform-config-inspect reads (it knows only .tf and .tf.json).
func tfName(name string) (string, bool) {
	if strings.HasPrefix(name, ".") {
		return "", false
	}
	for _, ext := range []struct{ tofu, tf string }{{".tofu.json", ".tf.json"}, {".tofu", ".tf"}} {
		if base, ok := strings.CutSuffix(name, ext.tofu); ok && base != "" {
			return base + ext.tf, true
		}
	}
	if strings.HasSuffix(name, ".tf") || strings.HasSuffix(name, ".tf.json") {
		return name, true
	}
	return "", false
}

// tofuFS shows terraform-config-inspect a directory as OpenTofu reads it:
// x.tofu as x.tf, and a .tf file hidden where a .tofu file of the same
// name stands in for it.
type tofuFS struct{ fsys fs.FS }

func (t tofuFS) real(name string) string {
	dir, file := path.Split(name)
	for _, ext := range []struct{ tf, tofu string }{{".tf.json", ".tofu.json"}, {".tf", ".tofu"}} {
		if base, ok := strings.CutSuffix(file, ext.tf); ok {
			if _, err := fs.Stat(t.fsys, path.Join(dir, base+ext.tofu)); err == nil {
				return path.Join(dir, base+ext.tofu)
			}
			break
		}
	}
	return path.Clean(name)
}

func (t tofuFS) Open(name string) (tfconfig.File, error) { return t.fsys.Open(t.real(name)) }

func (t tofuFS) ReadFile(name string) ([]byte, error) { return fs.ReadFile(t.fsys, t.real(name)) }

func (t tofuFS) ReadDir(dir string) ([]os.FileInfo, error) {
	entries, err := fs.ReadDir(t.fsys, path.Clean(dir))
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []os.FileInfo
	// .tofu names first, so that they shadow their .tf twins.
	slices.SortStableFunc(entries, func(a, b fs.DirEntry) int {
		return cmp.Compare(boolRank(!strings.Contains(a.Name(), ".tofu")), boolRank(!strings.Contains(b.Name(), ".tofu")))
	})
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		name, ok := tfName(e.Name())
		if !ok || seen[name] {
			continue
		}
		seen[name] = true
		info, err := e.Info()
		if err != nil {
			return nil, err
		}
		out = append(out, renamedInfo{FileInfo: info, name: name})
	}
	return out, nil
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

type renamedInfo struct {
	os.FileInfo
	name string
}

func (r renamedInfo) Name() string       { return r.name }
func (r renamedInfo) ModTime() time.Time { return time.Time{} }

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func inputsOf(m *tfconfig.Module) []Input {
	out := []Input{}
	for _, v := range m.Variables {
		def := json.RawMessage("null")
		if v.Default != nil {
			if raw, err := json.Marshal(v.Default); err == nil && len(raw) <= maxDefaultBytes {
				def = raw
			}
		}
		out = append(out, Input{Name: v.Name, Type: clip(v.Type, maxFactText), Description: clip(v.Description, maxFactText),
			Default: def, Required: v.Required, Sensitive: v.Sensitive})
	}
	slices.SortFunc(out, func(a, b Input) int { return cmp.Compare(a.Name, b.Name) })
	return capped(out)
}

func outputsOf(m *tfconfig.Module) []Output {
	out := []Output{}
	for _, o := range m.Outputs {
		out = append(out, Output{Name: o.Name, Description: clip(o.Description, maxFactText), Sensitive: o.Sensitive})
	}
	slices.SortFunc(out, func(a, b Output) int { return cmp.Compare(a.Name, b.Name) })
	return capped(out)
}

func resourcesOf(m *tfconfig.Module) []Resource {
	out := []Resource{}
	for _, set := range []map[string]*tfconfig.Resource{m.ManagedResources, m.DataResources} {
		for _, r := range set {
			out = append(out, Resource{Type: r.Type, Name: r.Name, Mode: r.Mode.String()})
		}
	}
	slices.SortFunc(out, func(a, b Resource) int {
		return cmp.Or(cmp.Compare(a.Mode, b.Mode), cmp.Compare(a.Type, b.Type), cmp.Compare(a.Name, b.Name))
	})
	return capped(out)
}

func providersOf(m *tfconfig.Module) []Provider {
	out := []Provider{}
	for name, p := range m.RequiredProviders {
		constraints := p.VersionConstraints
		if constraints == nil {
			constraints = []string{}
		}
		out = append(out, Provider{Name: name, Source: p.Source, VersionConstraints: constraints})
	}
	slices.SortFunc(out, func(a, b Provider) int { return cmp.Compare(a.Name, b.Name) })
	return capped(out)
}

func capped[T any](items []T) []T {
	if len(items) > maxFactItems {
		return items[:maxFactItems]
	}
	return items
}
