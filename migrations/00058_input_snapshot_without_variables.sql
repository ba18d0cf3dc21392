-- +goose Up

-- Each run also keeps its input snapshot less the variable references, for
-- every read of the run but the one that resolves a phase's inputs. A
-- workspace with twenty variable sets of a hundred variables pins 2,100
-- references, about 700 KB of the snapshot: a page of twenty such runs
-- made PostgreSQL fetch, decompress and render 14 MB, and even reading the
-- snapshot less its references decompresses the whole value. The full
-- snapshot stays as it was, since the previous release's workers read the
-- references from it; runs written before this column (or by that
-- release's API) have it NULL and are read from the full snapshot.
ALTER TABLE runs ADD COLUMN input_snapshot_without_variables jsonb;

-- +goose Down
ALTER TABLE runs DROP COLUMN input_snapshot_without_variables;
