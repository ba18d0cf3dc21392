package worker

import (
	"testing"

	"github.com/cairnhq/cairn/jobs/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { sandboxtest.Main(m.Run) }
