package workspace

import (
	"reflect"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx/reflectx"
)

// The lists scan by position: each of workspaceColumns must land in the
// field its name maps to (the db tag sqlx would match it to).
func TestFieldsFollowWorkspaceColumns(t *testing.T) {
	t.Parallel()
	var w Workspace
	extra := new(string)
	targets := w.scanTargets(nil, extra)
	columns := strings.Split(workspaceColumns, ",")
	if len(targets) != len(columns)+1 || targets[len(columns)] != extra {
		t.Fatalf("%d scan targets for %d columns and one extra", len(targets), len(columns))
	}
	byTag := reflectx.NewMapperFunc("db", strings.ToLower)
	row := reflect.ValueOf(&w).Elem()
	for i, column := range columns {
		_, name, _ := strings.Cut(strings.TrimSpace(column), ".")
		field := byTag.FieldByName(row, name)
		if !field.IsValid() {
			t.Fatalf("column %s has no field", name)
		}
		want, got := field.Addr(), reflect.ValueOf(targets[i])
		if got.Type() != want.Type() || got.Pointer() != want.Pointer() {
			t.Errorf("column %d (%s) scans into a %s that is not its field", i, name, got.Type())
		}
	}
}
