package runner

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/plandiff"
	"github.com/cairnhq/cairn/api/plandiff/plandifftest"
	"github.com/cairnhq/cairn/api/run"
)

// TestDiffAsWrittenIsTheDiffOfTheFile writes a plan's JSON in uneven
// chunks, as show's output arrives: the diff built while it is written is
// the one built from the whole, and a file with exactly those bytes
// matches it.
func TestDiffAsWrittenIsTheDiffOfTheFile(t *testing.T) {
	t.Parallel()
	var plan bytes.Buffer
	if err := plandifftest.PlanJSON(&plan, 300); err != nil {
		t.Fatal(err)
	}
	want, err := plandiff.Build(context.Background(), bytes.NewReader(plan.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var file bytes.Buffer
	s := diffAsWritten(context.Background(), &file, run.MaxPlanJSONBytes)
	for rest, n := plan.Bytes(), 1; len(rest) > 0; n = n*3 + 1 {
		chunk := rest[:min(n, len(rest))]
		rest = rest[len(chunk):]
		if w, err := s.Write(chunk); err != nil || w != len(chunk) {
			t.Fatalf("Write = %d, %v", w, err)
		}
	}
	s.close()
	got, err := s.result()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the diff built as written differs from the file's: %d resources, want %d", len(got.Resources), len(want.Resources))
	}
	if !bytes.Equal(file.Bytes(), plan.Bytes()) {
		t.Fatalf("the file holds %d bytes, not the %d written", file.Len(), plan.Len())
	}
	if err := s.matches(writeFile(t, plan.Bytes())); err != nil {
		t.Fatalf("the same bytes: %v", err)
	}
}

// TestShownPlanRefusesAFileThatChanged: a file of another length, or of
// the same length with one byte changed, is not what show wrote.
func TestShownPlanRefusesAFileThatChanged(t *testing.T) {
	t.Parallel()
	var plan bytes.Buffer
	if err := plandifftest.PlanJSON(&plan, 20); err != nil {
		t.Fatal(err)
	}
	s := diffAsWritten(context.Background(), io.Discard, run.MaxPlanJSONBytes)
	_, _ = s.Write(plan.Bytes())
	s.close()
	if _, err := s.result(); err != nil {
		t.Fatal(err)
	}
	changed := bytes.Replace(plan.Bytes(), []byte("item"), []byte("itex"), 1)
	for name, body := range map[string][]byte{
		"one byte changed": changed,
		"cut short":        plan.Bytes()[:plan.Len()-1],
		"appended":         append(bytes.Clone(plan.Bytes()), ' '),
	} {
		if err := s.matches(writeFile(t, body)); !errors.Is(err, errPlanJSONChanged) {
			t.Errorf("%s: %v, want errPlanJSONChanged", name, err)
		}
	}
}

// TestDiffAsWrittenNeverStallsShow: output the diff cannot read (not
// JSON: the diff stops at the first bytes) is still taken whole, so
// show's output reaches its file; the diff's error comes with its result.
func TestDiffAsWrittenNeverStallsShow(t *testing.T) {
	t.Parallel()
	s := diffAsWritten(context.Background(), io.Discard, run.MaxPlanJSONBytes)
	junk := []byte(strings.Repeat("not json ", 1<<17))
	for range 8 {
		if n, err := s.Write(junk); err != nil || n != len(junk) {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	s.close()
	if _, err := s.result(); err == nil {
		t.Fatal("a diff of output that is not JSON succeeded")
	}
	if s.written != int64(8*len(junk)) {
		t.Fatalf("counted %d bytes written, want %d", s.written, 8*len(junk))
	}
}

// TestShownPlanStopsShowAtTheLimit: past the plan JSON's limit nothing
// more reaches the file, the write fails (so show stops) and the attempt
// is refused for its size; up to it, everything is taken.
func TestShownPlanStopsShowAtTheLimit(t *testing.T) {
	t.Parallel()
	var file bytes.Buffer
	s := diffAsWritten(context.Background(), &file, 10)
	if n, err := s.Write([]byte("0123456789")); err != nil || n != 10 {
		t.Fatalf("writing up to the limit: %d, %v", n, err)
	}
	if _, err := s.Write([]byte("x")); !errors.Is(err, errPlanJSONTooLarge) {
		t.Fatalf("writing past the limit: %v, want errPlanJSONTooLarge", err)
	}
	s.close()
	if !errors.Is(s.refused, errPlanJSONTooLarge) || file.String() != "0123456789" || s.written != 10 {
		t.Fatalf("refused %v, file %q, written %d", s.refused, file.String(), s.written)
	}
}

func writeFile(t *testing.T, body []byte) *os.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
