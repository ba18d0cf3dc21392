package tfe_test

import (
	"net/http"
	"testing"

	"github.com/cairnhq/cairn/api/apitest"
)

// TestHugePageNumberIsAnEmptyPage: a page number whose offset overflows is
// bad input, answered as an empty page, never a database error.
func TestHugePageNumberIsAnEmptyPage(t *testing.T) {
	t.Parallel()
	env := apitest.New(t)
	u := newCloudUser(t, env, "Pager")
	for _, path := range []string{"/api/v2/organizations/" + u.org + "/runs", "/api/v2/organizations/" + u.org + "/runs/queue"} {
		r := u.call(t, http.MethodGet, path+"?page[number]=100000000000000000&page[size]=100", nil)
		if r.Status != http.StatusOK {
			t.Errorf("%s with a huge page number = %d, want 200", path, r.Status)
		}
	}
}
