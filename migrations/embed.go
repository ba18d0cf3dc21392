package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/rivermigrate"
)

// SQL holds the numbered plain-SQL migrations of this directory.
//
//go:embed *.sql
var SQL embed.FS

// riverSchemaVersion is the River migration version that River v0.41.0
// expects. Upgrading River means adding a new Go migration with the new
// target, never editing this one.
const riverSchemaVersion = 7

// Go returns the migrations written in Go. Version 1 installs River's own
// tables through River's migrator, so one `cairn-api migrate` brings both
// schemas up together. It runs outside goose's transaction because River's
// migrations must commit one by one (a later one uses an enum value an
// earlier one adds); River records each step in its own table, so an
// interrupted run resumes where it stopped.
func Go() []*goose.Migration {
	return []*goose.Migration{
		goose.NewGoMigration(1,
			&goose.GoFunc{RunDB: func(ctx context.Context, db *sql.DB) error {
				return migrateRiver(ctx, db, rivermigrate.DirectionUp, riverSchemaVersion)
			}},
			&goose.GoFunc{RunDB: func(ctx context.Context, db *sql.DB) error {
				return migrateRiver(ctx, db, rivermigrate.DirectionDown, -1)
			}},
		),
	}
}

func migrateRiver(ctx context.Context, db *sql.DB, direction rivermigrate.Direction, target int) error {
	migrator, err := rivermigrate.New(riverdatabasesql.New(db), nil)
	if err != nil {
		return fmt.Errorf("creating river migrator: %w", err)
	}
	if _, err := migrator.Migrate(ctx, direction, &rivermigrate.MigrateOpts{TargetVersion: target}); err != nil {
		return fmt.Errorf("migrating river schema %s: %w", direction, err)
	}
	return nil
}
