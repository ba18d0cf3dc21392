// Package migrations holds Cairn's database schema: numbered plain-SQL files
// applied in order by goose, plus River's queue tables installed as Go
// migration 1. Migrations are append-only; a change to the schema is a new
// file, never an edit of an applied one.
package migrations
