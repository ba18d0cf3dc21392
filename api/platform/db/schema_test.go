package db_test

import (
	"testing"

	"github.com/cairnhq/cairn/api/platform/dbtest"
)

// TestForeignKeysHaveIndexes: deleting a parent row makes PostgreSQL look
// for its children, and without an index on the child's column that look
// scans the whole child table once per deleted row (00056). Every foreign
// key must therefore lead an index of its table with one of its columns,
// and not with organization_id, which every row of an organization shares.
// Keys to organizations and users are exempt: an organization is deleted
// one row at a time, and users never are.
func TestForeignKeysHaveIndexes(t *testing.T) {
	t.Parallel()
	conn := dbtest.New(t)
	var unindexed []string
	if err := conn.Select(&unindexed, `
		SELECT c.conrelid::regclass || ' -> ' || c.confrelid::regclass || ' (' || c.conname || ')'
		FROM pg_constraint c
		WHERE c.contype = 'f' AND c.confrelid NOT IN ('organizations'::regclass, 'users'::regclass)
		  AND NOT EXISTS (
			SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
			WHERE i.indrelid = c.conrelid AND i.indkey[0] = ANY (c.conkey) AND a.attname <> 'organization_id')
		ORDER BY 1`); err != nil {
		t.Fatal(err)
	}
	var keys int
	if err := conn.Get(&keys, `SELECT count(*) FROM pg_constraint WHERE contype = 'f'`); err != nil {
		t.Fatal(err)
	}
	if keys < 50 {
		t.Fatalf("only %d foreign keys: the schema was not migrated", keys)
	}
	for _, k := range unindexed {
		t.Errorf("foreign key without an index on its referencing column: %s", k)
	}
}
