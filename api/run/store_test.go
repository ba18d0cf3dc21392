package run

import (
	"context"
	"testing"

	"github.com/cairnhq/cairn/api/platform/dbtest"
)

func TestCurrentStateOfAnEmptyWorkspaceIsNone(t *testing.T) {
	t.Parallel()
	conn := dbtest.New(t)
	ref, err := currentState(context.Background(), conn, "ws_none")
	if err != nil || ref.ID != nil || len(ref.SHA256) != 0 {
		t.Fatalf("current state of an empty workspace: %+v, %v", ref, err)
	}
}
