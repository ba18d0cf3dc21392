package authcache

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jmoiron/sqlx"
)

// Untriggered lists the tables that query, run with args, reads (as its
// plan names them) and that no enabled statement trigger watches for every
// kind of principal change. The
// packages that cache a principal check their credential queries with it,
// so a table added to one without a trigger fails their tests instead of
// leaving principals stale.
func Untriggered(ctx context.Context, q sqlx.QueryerContext, query string, args ...any) ([]string, error) {
	var plan []byte
	if err := sqlx.GetContext(ctx, q, &plan, "EXPLAIN (FORMAT JSON) "+query, args...); err != nil {
		return nil, fmt.Errorf("explaining the query: %w", err)
	}
	var doc any
	if err := json.Unmarshal(plan, &doc); err != nil {
		return nil, fmt.Errorf("reading the plan: %w", err)
	}
	var tables []string
	collectRelations(doc, &tables)
	if len(tables) == 0 {
		return nil, fmt.Errorf("the plan names no table")
	}
	slices.Sort(tables)
	tables = slices.Compact(tables)
	var missing []string
	for _, table := range tables {
		var watched bool
		err := sqlx.GetContext(ctx, q, &watched, `SELECT EXISTS (
			SELECT 1 FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
			WHERE t.tgrelid = to_regclass($1) AND p.proname = 'notify_principals_changed' AND NOT t.tgisinternal
			  -- enabled, once per statement, after INSERT, DELETE, UPDATE and TRUNCATE
			  AND t.tgenabled <> 'D' AND t.tgtype & 1 = 0 AND t.tgtype & 60 = 60)`, table)
		if err != nil {
			return nil, fmt.Errorf("reading the triggers of %s: %w", table, err)
		}
		if !watched {
			missing = append(missing, table)
		}
	}
	return missing, nil
}

func collectRelations(v any, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		if name, ok := v["Relation Name"].(string); ok {
			*out = append(*out, name)
		}
		for _, child := range v {
			collectRelations(child, out)
		}
	case []any:
		for _, child := range v {
			collectRelations(child, out)
		}
	}
}
