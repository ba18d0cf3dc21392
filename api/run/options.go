package run

import (
	"crypto/sha256"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/lib/pq"

	"github.com/cairnhq/cairn/api/workspace"
)

// Bounds of the per-run options.
const (
	// MaxRunAddrs bounds the target and the replace addresses, each.
	MaxRunAddrs = 100
	// MaxRunAddrBytes bounds one resource address.
	MaxRunAddrBytes = 1024
	// MaxRunVariables bounds the run variables.
	MaxRunVariables = 100
	// MaxRunVariableValueBytes bounds one run variable's value, as a
	// workspace variable's is.
	MaxRunVariableValueBytes = workspace.MaxValueBytes
)

// RunOptions are what a run's creator may choose besides its kind: the
// resources the plan targets or must replace, its refresh mode, whether an
// empty plan still goes on to an apply, whether the run is a saved plan,
// and run variables. They are fixed when the run is created and recorded
// in its input snapshot.
type RunOptions struct {
	// TargetAddrs narrow the plan to these resources (tofu plan -target).
	TargetAddrs pq.StringArray `db:"target_addrs"`
	// ReplaceAddrs force these resources to be replaced (-replace).
	ReplaceAddrs pq.StringArray `db:"replace_addrs"`
	// Refresh false skips refreshing state before planning
	// (-refresh=false).
	Refresh bool `db:"refresh"`
	// RefreshOnly plans only to bring the state up to date with the real
	// infrastructure (-refresh-only); its apply writes that state.
	RefreshOnly bool `db:"refresh_only"`
	// AllowEmptyApply lets a plan without changes go on to policy,
	// approval and an apply (which updates outputs and state metadata).
	AllowEmptyApply bool `db:"allow_empty_apply"`
	// SavePlan makes the run a saved plan: it plans at once without
	// holding the workspace queue, and applies only when someone applies
	// it later, if the state has not moved since its plan.
	SavePlan bool `db:"save_plan"`
	// Variables override the workspace's variables of the same key for
	// this run only.
	Variables RunVariables `db:"run_variables"`
}

// DefaultRunOptions are the options of a run that asked for none.
func DefaultRunOptions() RunOptions { return RunOptions{Refresh: true} }

// IsDefault reports whether o asks for nothing beyond a default run.
func (o RunOptions) IsDefault() bool {
	return len(o.TargetAddrs) == 0 && len(o.ReplaceAddrs) == 0 && o.Refresh && !o.RefreshOnly && !o.AllowEmptyApply &&
		!o.SavePlan && len(o.Variables) == 0
}

// RunVariable is one run variable. Its value is an HCL expression, as HCP
// Terraform's run variables are: a string value is written quoted
// ("\"eu-west-1\""). Run variables are not sensitive; the run shows them.
type RunVariable struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// RunVariables are a run's variables, in the order given.
type RunVariables []RunVariable

// Scan reads a jsonb column.
func (v *RunVariables) Scan(src any) error { return scanJSON(src, v) }

// Value writes a jsonb column; no variables are an empty array.
func (v RunVariables) Value() (driver.Value, error) {
	if v == nil {
		return "[]", nil
	}
	return valueJSON([]RunVariable(v))
}

// ErrRunOption wraps every refused run option.
var ErrRunOption = fmt.Errorf("%w: run option refused", ErrInvalid)

// ErrToolVersionPlanOnly means a run asked for its own tool version but
// could apply: a plan made with another tool than the workspace's never
// writes state.
var ErrToolVersionPlanOnly = fmt.Errorf("%w: a run's own tool version needs a plan-only run", ErrRunOption)

// ErrToolVersionUnsupported means a run asked for a tool version the API
// does not offer.
var ErrToolVersionUnsupported = fmt.Errorf("%w: tool version not offered", ErrRunOption)

// OptionError is a refused run option: which one, and why, in a sentence
// that names only the option and its bounds, never the value sent.
type OptionError struct {
	// Field is the option's name as /v1 spells it (target_addrs, ...).
	Field string
	// Reason is the safe sentence shown to the caller.
	Reason string
	// Kind is the sentinel the refusal is (ErrRunOption when not more
	// specific).
	Kind error
}

func (e *OptionError) Error() string { return "run option " + e.Field + ": " + e.Reason }

func (e *OptionError) Unwrap() error { return e.Kind }

func optionError(field, format string, args ...any) *OptionError {
	return &OptionError{Field: field, Reason: fmt.Sprintf(format, args...), Kind: ErrRunOption}
}

// OptionErrorOf returns the refused option err names, if any.
func OptionErrorOf(err error) (*OptionError, bool) {
	var oe *OptionError
	ok := errors.As(err, &oe)
	return oe, ok
}

// Validate checks the options of a run of kind: the bounds of every list
// and value, that each address parses as a resource address, and that
// the options fit together and fit the kind.
func (o RunOptions) Validate(kind Kind) error {
	for _, list := range []struct {
		field string
		addrs []string
	}{{"target_addrs", o.TargetAddrs}, {"replace_addrs", o.ReplaceAddrs}} {
		field, addrs := list.field, list.addrs
		if len(addrs) > MaxRunAddrs {
			return optionError(field, "at most %d addresses", MaxRunAddrs)
		}
		for i, addr := range addrs {
			if err := validateAddress(addr); err != nil {
				return optionError(field, "address %d %s", i+1, err.Error())
			}
		}
	}
	if o.RefreshOnly && !o.Refresh {
		return optionError("refresh_only", "a refresh-only plan needs refresh: refresh false conflicts with it")
	}
	if o.RefreshOnly && len(o.ReplaceAddrs) > 0 {
		return optionError("replace_addrs", "a refresh-only plan replaces nothing")
	}
	if o.SavePlan && kind != KindPlanAndApply {
		return optionError("save_plan", "only a plan_and_apply run can be a saved plan")
	}
	if o.AllowEmptyApply && kind != KindPlanAndApply {
		return optionError("allow_empty_apply", "only a plan_and_apply run applies")
	}
	return o.Variables.validate()
}

func (v RunVariables) validate() error {
	if len(v) > MaxRunVariables {
		return optionError("variables", "at most %d variables", MaxRunVariables)
	}
	seen := make(map[string]bool, len(v))
	for i, x := range v {
		if !workspace.IsIdentifier(x.Key) {
			return optionError("variables", "variable %d: key must be an identifier of at most 128 characters", i+1)
		}
		if seen[x.Key] {
			return optionError("variables", "variable %d: key given twice", i+1)
		}
		seen[x.Key] = true
		// The value's syntax is checked when the run plans, as HCP
		// Terraform checks it.
		if workspace.ValidateValue(x.Value, false) != nil {
			return optionError("variables", "variable %d: value must be UTF-8 without NUL, of at most %d bytes", i+1,
				MaxRunVariableValueBytes)
		}
	}
	return nil
}

// errAddress explains a refused address without repeating it.
type errAddress string

func (e errAddress) Error() string { return string(e) }

// validateAddress checks one resource address: at most MaxRunAddrBytes of
// printable UTF-8, exactly one absolute HCL traversal of at least two
// steps (null_resource.example, module.a.aws_instance.b["k"]), as OpenTofu
// parses -target and -replace.
func validateAddress(addr string) error {
	switch {
	case addr == "":
		return errAddress("is empty")
	case len(addr) > MaxRunAddrBytes:
		return errAddress(fmt.Sprintf("is over %d bytes", MaxRunAddrBytes))
	case !utf8.ValidString(addr) || strings.IndexFunc(addr, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }) >= 0:
		return errAddress("must be printable UTF-8 without spaces")
	}
	traversal, diags := hclsyntax.ParseTraversalAbs([]byte(addr), "address", hcl.InitialPos)
	// The parser stops at the first token that cannot continue the
	// traversal: whatever follows it is not part of the address.
	if diags.HasErrors() || traversal.SourceRange().End.Byte != len(addr) || len(traversal) < 2 {
		return errAddress("is not a resource address")
	}
	return nil
}

// optionsSnapshot is how a run's input snapshot records its options: each
// run variable by key and the SHA-256 of its value (the values are on the
// run), and the tool version the run asked for, if any.
type optionsSnapshot struct {
	TargetAddrs     []string              `json:"target_addrs"`
	ReplaceAddrs    []string              `json:"replace_addrs"`
	Refresh         bool                  `json:"refresh"`
	RefreshOnly     bool                  `json:"refresh_only"`
	AllowEmptyApply bool                  `json:"allow_empty_apply"`
	SavePlan        bool                  `json:"save_plan"`
	Variables       []runVariableSnapshot `json:"variables"`
	ToolVersion     string                `json:"tool_version,omitempty"`
}

type runVariableSnapshot struct {
	Key         string `json:"key"`
	ValueSHA256 string `json:"value_sha256"`
}

// snapshotOptions is the record of o in an input snapshot, or nil for a
// run that asked for nothing: such a run's snapshot (and digest) is what
// it was before runs had options.
func snapshotOptions(o RunOptions, toolVersion string) *optionsSnapshot {
	if o.IsDefault() && toolVersion == "" {
		return nil
	}
	s := &optionsSnapshot{TargetAddrs: nonNil(o.TargetAddrs), ReplaceAddrs: nonNil(o.ReplaceAddrs), Refresh: o.Refresh,
		RefreshOnly: o.RefreshOnly, AllowEmptyApply: o.AllowEmptyApply, SavePlan: o.SavePlan,
		Variables: make([]runVariableSnapshot, 0, len(o.Variables)), ToolVersion: toolVersion}
	for _, v := range o.Variables {
		sum := sha256.Sum256([]byte(v.Value))
		s.Variables = append(s.Variables, runVariableSnapshot{Key: v.Key, ValueSHA256: hex.EncodeToString(sum[:])})
	}
	return s
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return slices.Clone(s)
}

// WithRunVariables is what a run's plan is given: the variables it pinned,
// except the terraform ones a run variable of the same key overrides, then
// the run variables, as HCL expressions and not sensitive. A priority
// set's value is never overridden: the run variable of its key is dropped.
func WithRunVariables(pinned []workspace.ResolvedVariable, vars RunVariables) []workspace.ResolvedVariable {
	prioritized := map[string]bool{}
	for _, v := range pinned {
		if v.Priority && v.Category != workspace.CategoryEnv {
			prioritized[v.Key] = true
		}
	}
	overridden := make(map[string]bool, len(vars))
	for _, v := range vars {
		overridden[v.Key] = !prioritized[v.Key]
	}
	out := make([]workspace.ResolvedVariable, 0, len(pinned)+len(vars))
	for _, v := range pinned {
		if v.Category == workspace.CategoryEnv || !overridden[v.Key] {
			out = append(out, v)
		}
	}
	for _, v := range vars {
		if !prioritized[v.Key] {
			out = append(out, workspace.ResolvedVariable{Key: v.Key, Category: workspace.CategoryTerraform, Value: v.Value, HCL: true})
		}
	}
	return out
}
