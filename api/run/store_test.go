package run

import (
	"context"
	"strings"
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

// What a phase prints is stored whatever it is: PostgreSQL refuses NUL and
// invalid UTF-8, and a chunk cut inside a character is invalid too.
func TestLogChunksAreStorable(t *testing.T) {
	t.Parallel()
	conn := dbtest.New(t)
	ctx := context.Background()
	if _, err := conn.ExecContext(ctx, `SELECT $1::text`, "a\x00b"); err == nil {
		t.Fatal("PostgreSQL stored a NUL, so this test proves nothing")
	}
	b := newLogBuffer([]string{"hunter2-canary"})
	b.write([]byte("binary \x00\xff\xfe output\n"))
	b.write([]byte(strings.Repeat("\u00e9", maxChunkSize))) // a line of two-byte characters, cut and chunked
	b.write([]byte("\xe2\x82"))                             // a character cut short at the end
	chunks := logChunks(b.take(true))
	if len(chunks) < 3 {
		t.Fatalf("%d chunks, want the long line split", len(chunks))
	}
	for i, c := range chunks {
		if _, err := conn.ExecContext(ctx, `SELECT $1::text`, c); err != nil {
			t.Fatalf("chunk %d of %d bytes: %v", i, len(c), err)
		}
	}
}
