package oauth

import (
	"context"
	"testing"

	"github.com/cairnhq/cairn/api/authcache"
	"github.com/cairnhq/cairn/api/platform/dbtest"
)

// TestCachedAccessTokenQueryReadsOnlyWatchedTables: an access token's
// principal is kept in memory until a change to what it was read from is
// announced (migration 00059); a table added to the query without the
// trigger would leave it stale.
func TestCachedAccessTokenQueryReadsOnlyWatchedTables(t *testing.T) {
	t.Parallel()
	conn := dbtest.New(t)
	missing, err := authcache.Untriggered(context.Background(), conn, accessTokenQuery, []byte("hash"))
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Errorf("the access token query reads %v, which announce no changes to cached principals", missing)
	}
}
