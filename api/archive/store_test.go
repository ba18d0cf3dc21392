package archive

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/cairnhq/cairn/api/platform/blob"
	"github.com/cairnhq/cairn/api/platform/seal"
)

func testBlobs(t *testing.T) *blob.Store {
	t.Helper()
	sealer, err := seal.NewStreamSealer(bytes.Repeat([]byte{5}, 32))
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := blob.OpenDir(t.TempDir(), "", sealer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { blobs.Close() })
	return blobs
}

// incompressibleArchive is a valid archive several times larger than
// fanout's queue, so a cut in its middle reaches the validator mid-stream.
func incompressibleArchive(t *testing.T) []byte {
	t.Helper()
	body := make([]byte, 3<<20)
	rng := rand.NewChaCha8([32]byte{9})
	_, _ = rng.Read(body)
	return archiveOf(t, entry{name: "main.tf", body: `resource "terraform_data" "x" {}`}, entry{name: "blob.bin", body: string(body)})
}

// cutReader serves the first n bytes of b and then fails with err, as a
// request body does when its client disconnects.
type cutReader struct {
	b   []byte
	n   int
	err error
}

func (c *cutReader) Read(p []byte) (int, error) {
	if c.n == 0 {
		return 0, c.err
	}
	k := copy(p[:min(len(p), c.n)], c.b)
	c.b, c.n = c.b[k:], c.n-k
	return k, nil
}

func TestStoreKeepsAnArchiveItAccepts(t *testing.T) {
	t.Parallel()
	blobs, raw := testBlobs(t), incompressibleArchive(t)
	manifest, digests, err := Store(context.Background(), blobs, "k", "id", bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatalf("Store: %v", err)
	}
	if manifest.Entries != 2 || digests.Size != int64(len(raw)) {
		t.Fatalf("manifest %+v, digests size %d, want 2 entries and %d bytes", manifest, digests.Size, len(raw))
	}
	rc, err := blobs.Open(context.Background(), "k", "id")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if got, _ := io.ReadAll(rc); !bytes.Equal(got, raw) {
		t.Fatal("stored bytes differ from the upload")
	}
}

// A client that goes away mid-upload has not sent a malformed archive: the
// caller must see the upload's own error (and may keep the version pending
// for a retry), never an archive code that would mark it errored for good.
func TestStoreReportsACutUploadAsTheUploadsError(t *testing.T) {
	t.Parallel()
	errGone := errors.New("client went away")
	raw := incompressibleArchive(t)
	for _, cut := range []int{100, 64 << 10, 1 << 20, len(raw) - 10} {
		blobs := testBlobs(t)
		_, _, err := Store(context.Background(), blobs, "k", "id", &cutReader{b: raw, n: cut, err: errGone}, int64(len(raw)))
		if !errors.Is(err, errGone) {
			t.Fatalf("cut at %d: err %v, want the reader's error", cut, err)
		}
		if code := CodeOf(err); code != "" {
			t.Fatalf("cut at %d: archive code %q for a cut upload", cut, code)
		}
		if _, err := blobs.Open(context.Background(), "k", "id"); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("cut at %d: object left behind: %v", cut, err)
		}
	}
}

// A stream that ends cleanly but early is what the client sent: malformed.
// So is one whose bytes are not an archive, however long it runs.
func TestStoreRefusesWhatTheClientSent(t *testing.T) {
	t.Parallel()
	raw := incompressibleArchive(t)
	garbage := make([]byte, 2<<20)
	_, _ = rand.NewChaCha8([32]byte{4}).Read(garbage)
	for name, body := range map[string][]byte{
		"ended early":    raw[:len(raw)/2],
		"not an archive": garbage,
		"bad gzip body":  append(append([]byte{}, raw[:20]...), garbage...),
	} {
		_, _, err := Store(context.Background(), testBlobs(t), "k", "id", bytes.NewReader(body), int64(len(body)))
		if code := CodeOf(err); code != codeMalformed {
			t.Errorf("%s: err %v (code %q), want %s", name, err, code, codeMalformed)
		}
	}
}

func TestStoreRefusesOverLimitAsTooLarge(t *testing.T) {
	t.Parallel()
	raw := incompressibleArchive(t)
	_, _, err := Store(context.Background(), testBlobs(t), "k", "id", bytes.NewReader(raw), int64(len(raw))-1)
	if code := CodeOf(err); code != codeTooLarge {
		t.Fatalf("err %v (code %q), want %s", err, code, codeTooLarge)
	}
}
