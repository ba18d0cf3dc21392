package policy

import (
	"bytes"
	"crypto/sha256"
	"io"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/policy/rego"
)

// TestVerifyingReaderWithholdsAWrongEnd: the right bytes read through
// whole; wrong bytes of the same length stop with a mismatch before their
// last chunk is released, however the reader is read.
func TestVerifyingReaderWithholdsAWrongEnd(t *testing.T) {
	t.Parallel()
	body := bytes.Repeat([]byte("bundle bytes "), 20_000) // 260,000 bytes: several chunks
	sum := sha256.Sum256(body)
	wrong := bytes.Clone(body)
	wrong[len(wrong)-1] ^= 1
	for _, size := range []int{1, 7, 4096, 1 << 20} {
		got, err := readAll(newVerifyingReader(io.NopCloser(bytes.NewReader(body)), sum[:]), size)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("reading by %d: %d bytes, %v", size, len(got), err)
		}
		got, err = readAll(newVerifyingReader(io.NopCloser(bytes.NewReader(wrong)), sum[:]), size)
		if rego.CodeOf(err) != codeBundleMismatch {
			t.Fatalf("reading wrong bytes by %d: %v", size, err)
		}
		if len(got) >= len(wrong) {
			t.Fatalf("reading wrong bytes by %d released all %d of them", size, len(got))
		}
	}
	// An empty bundle is wrong too.
	if _, err := readAll(newVerifyingReader(io.NopCloser(strings.NewReader("")), sum[:]), 10); rego.CodeOf(err) != codeBundleMismatch {
		t.Fatalf("empty stream: %v", err)
	}
}

// readAll reads r with a buffer of size until EOF or an error.
func readAll(r io.Reader, size int) ([]byte, error) {
	var out []byte
	buf := make([]byte, size)
	for {
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// TestCodeHostRunInput: a tracked or speculative run's input names the
// provider repository and the real commit, and passes the input checks;
// a manual run keeps its configuration version as repository.
func TestCodeHostRunInput(t *testing.T) {
	t.Parallel()
	s := &Service{}
	sha := strings.Repeat("ab", 20)
	for _, kind := range []string{"tracked", "speculative"} {
		meta := s.inputMeta(RunFacts{RunID: "run_x", Kind: kind, CommitSHA: &sha, ConfigurationVersionID: "cfg_1",
			RepositoryID: "9001", WorkingDirectory: "infra", WorkspaceID: "ws_1"})
		if meta.RepositoryID != "9001" || *meta.CommitSHA != sha || meta.WorkingDirectory != "infra" {
			t.Fatalf("%s meta: %+v", kind, meta)
		}
		plan := `{"format_version":"1.2","resource_changes":[]}`
		if _, err := rego.BuildInput(t.Context(), strings.NewReader(plan), meta); err != nil {
			t.Fatalf("%s input refused: %v", kind, err)
		}
	}
	if meta := s.inputMeta(RunFacts{Kind: "manual", ConfigurationVersionID: "cfg_1"}); meta.RepositoryID != "cfg_1" {
		t.Fatalf("manual meta: %+v", meta)
	}
}
