package identity

import (
	"context"
	"testing"

	"github.com/cairnhq/cairn/api/authcache"
	"github.com/cairnhq/cairn/api/platform/dbtest"
)

// TestCachedCredentialQueriesReadOnlyWatchedTables: a session's or user
// token's principal is kept in memory until a change to what it was read
// from is announced (migration 00059). A table added to either query
// without the trigger would leave principals stale: this fails first.
func TestCachedCredentialQueriesReadOnlyWatchedTables(t *testing.T) {
	t.Parallel()
	conn := dbtest.New(t)
	for name, query := range map[string]string{"session": sessionWithGrantsQuery, "user token": userTokenQuery} {
		missing, err := authcache.Untriggered(context.Background(), conn, query, []byte("hash"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(missing) > 0 {
			t.Errorf("the %s query reads %v, which announce no changes to cached principals", name, missing)
		}
	}
}
