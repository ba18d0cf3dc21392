package varset

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cairnhq/cairn/api/credential"
	"github.com/cairnhq/cairn/api/workspace"
)

// Set is a variable set of an organization. A global set applies to every
// workspace; otherwise to the workspaces listed and those of the projects
// listed.
type Set struct {
	ID             string    `db:"id"`
	OrganizationID string    `db:"organization_id"`
	Name           string    `db:"name"`
	Description    string    `db:"description"`
	Global         bool      `db:"global"`
	Priority       bool      `db:"priority"`
	ProjectIDs     []string  `db:"-"`
	WorkspaceIDs   []string  `db:"-"`
	VariableCount  int       `db:"variable_count"`
	CreatedAt      time.Time `db:"created_at"`
	UpdatedAt      time.Time `db:"updated_at"`
}

// Variable is a variable of a set. Value is nil for sensitive variables:
// their value is sealed at rest and never read back.
type Variable struct {
	ID             string    `db:"id"`
	SetID          string    `db:"variable_set_id"`
	OrganizationID string    `db:"organization_id"`
	Key            string    `db:"key"`
	Value          *string   `db:"value"`
	Description    string    `db:"description"`
	Category       string    `db:"category"`
	HCL            bool      `db:"hcl"`
	Sensitive      bool      `db:"sensitive"`
	ValueVersion   int       `db:"value_version"`
	ValueDigest    []byte    `db:"value_digest"`
	VersionID      string    `db:"-"`
	CreatedAt      time.Time `db:"created_at"`
	UpdatedAt      time.Time `db:"updated_at"`
}

// versionID changes on every update of the variable (value or settings):
// /api/v2's version-id.
func versionID(v Variable) string {
	return workspace.VersionID(v.ID, v.ValueVersion, v.UpdatedAt)
}

// SetInput is a set's new settings; nil keeps the current one (Name is
// required on create).
type SetInput struct {
	Name        *string
	Description *string
	Global      *bool
	Priority    *bool
}

// VariableInput is a set variable's content. On update a nil Value keeps
// the stored value, its version and digest.
type VariableInput struct {
	Key         string
	Category    string
	Description string
	Value       *string
	HCL         bool
	Sensitive   bool
}

// ListQuery selects a page of sets in name order.
type ListQuery struct {
	// Query keeps sets whose name contains it, ignoring case.
	Query  string
	Cursor string
	Limit  int
}

// Scopes a set reaches a workspace by.
const (
	ScopeGlobal    = "global"
	ScopeProject   = "project"
	ScopeWorkspace = "workspace"
)

// Candidate is one value a new run of a workspace could get for a
// (category, key): a workspace variable or a set variable. Wins marks the
// one it gets.
type Candidate struct {
	// ID is the workspace variable's or set variable's.
	ID             string
	Key            string
	Category       string
	Value          *string
	Sensitive, HCL bool
	// Source is workspace or variable_set; SourceID and SourceName name
	// the workspace or the set.
	Source     string
	SourceID   string
	SourceName string
	// Scope is how the value reaches the workspace: workspace, project or
	// global.
	Scope    string
	Priority bool
	Wins     bool
}

// Limits of a set and its variables.
const (
	MaxNameChars        = 128
	MaxDescriptionChars = 512
)

// Tier is a value's precedence, 1 the highest: (1) priority global set,
// (2) priority project set, (3) priority workspace set, (4) run variables
// (TierRunVariables), (5) workspace variables, (6) workspace-scoped set,
// (7) project-scoped set, (8) global set.
func Tier(source, scope string, priority bool) int {
	if source == workspace.SourceWorkspace {
		return TierWorkspaceVariables
	}
	order := map[string]int{ScopeGlobal: 0, ScopeProject: 1, ScopeWorkspace: 2}[scope]
	if priority {
		return 1 + order
	}
	return 8 - order
}

// The tiers between the priority and the ordinary sets.
const (
	TierRunVariables       = 4
	TierWorkspaceVariables = 5
)

// resolve orders the candidates by category, key, tier and (within a tier)
// set name in byte order, and marks the first of each category and key as
// the winner. A set that reaches the workspace by several scopes is a
// candidate once, at its best tier (the caller's query gives one row per
// set scope; the worse ones are dropped here).
func resolve(cands []workspace.PinnableVariable) []workspace.PinnableVariable {
	slices.SortStableFunc(cands, func(a, b workspace.PinnableVariable) int {
		if c := strings.Compare(a.Category, b.Category); c != 0 {
			return c
		}
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		if c := Tier(a.Source, a.Scope, a.Priority) - Tier(b.Source, b.Scope, b.Priority); c != 0 {
			return c
		}
		return strings.Compare(a.SetName, b.SetName)
	})
	out := make([]workspace.PinnableVariable, 0, len(cands))
	seen := map[string]bool{}
	for _, c := range cands {
		if seen[c.ID] {
			continue
		}
		seen[c.ID] = true
		out = append(out, c)
	}
	return out
}

// wins reports whether the i-th candidate of a resolved list is the first
// of its category and key, the one a run gets.
func wins(resolved []workspace.PinnableVariable, i int) bool {
	return i == 0 || resolved[i].Category != resolved[i-1].Category || resolved[i].Key != resolved[i-1].Key
}

// winners keeps the winner of each category and key of a resolved list.
func winners(resolved []workspace.PinnableVariable) []workspace.PinnableVariable {
	out := make([]workspace.PinnableVariable, 0, len(resolved))
	for i, c := range resolved {
		if wins(resolved, i) {
			out = append(out, c)
		}
	}
	return out
}

// validateName checks a set name and returns it trimmed.
func validateName(raw string) (string, error) {
	name := strings.TrimSpace(raw)
	if name == "" || utf8.RuneCountInString(name) > MaxNameChars || !utf8.ValidString(name) || strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("%w: name must be 1–%d characters", ErrInvalid, MaxNameChars)
	}
	return name, nil
}

// validateDescription checks a set's or a set variable's description
// (HCP refuses either over 512 characters) and returns it trimmed.
func validateDescription(raw string) (string, error) {
	d := strings.TrimSpace(raw)
	if utf8.RuneCountInString(d) > MaxDescriptionChars || !utf8.ValidString(d) || strings.ContainsRune(d, 0) {
		return "", fmt.Errorf("%w: description is over %d characters", ErrInvalid, MaxDescriptionChars)
	}
	return d, nil
}

// validateVariable checks a variable's category, key and HCL flag: a
// terraform key is an OpenTofu variable name; an env key is a shell name
// the runner does not set itself and that does not change how the sandbox
// or the CLI behaves (the names credential profiles may not set either).
func validateVariable(key, category string, hcl bool) error {
	if rule := workspace.CategoryKeyRule(key, category, hcl); rule != "" {
		return fmt.Errorf("%w: %s", ErrInvalid, rule)
	}
	if category == workspace.CategoryEnv && credential.RunnerOwnsEnvironmentName(key) {
		return fmt.Errorf("%w: %s is set by the runner or changes how the sandbox runs", ErrInvalid, key)
	}
	return nil
}
