package sweep

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// referencedKeys returns which of keys a committed row references. Every
// column that holds a blob key is listed here; a new one must be added.
func referencedKeys(ctx context.Context, q sqlx.QueryerContext, keys []string) (map[string]bool, error) {
	var found []string
	err := sqlx.SelectContext(ctx, q, &found, `
		SELECT blob_key FROM state_versions WHERE blob_key = ANY($1)
		UNION SELECT json_blob_key FROM state_versions WHERE json_blob_key = ANY($1)
		UNION SELECT blob_key FROM configuration_versions WHERE blob_key = ANY($1)
		UNION SELECT blob_key FROM run_artifacts WHERE blob_key = ANY($1)
		UNION SELECT blob_key FROM policy_artifacts WHERE blob_key = ANY($1)
		UNION SELECT blob_key FROM run_log_segments WHERE blob_key = ANY($1)
		UNION SELECT blob_key FROM registry_module_versions WHERE blob_key = ANY($1)`, pq.Array(keys))
	if err != nil {
		return nil, fmt.Errorf("finding referenced objects: %w", err)
	}
	out := make(map[string]bool, len(found))
	for _, k := range found {
		out[k] = true
	}
	return out, nil
}
