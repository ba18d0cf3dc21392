package v1_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/authserver"
	v1 "github.com/cairnhq/cairn/api/v1"
)

// readCounter counts the bytes a server reads from its connections.
type readCounter struct {
	net.Listener
	read *atomic.Int64
}

func (l readCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countedConn{Conn: c, read: l.read}, nil
}

type countedConn struct {
	net.Conn
	read *atomic.Int64
}

func (c countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// byteCounter counts what is written to it.
type byteCounter int

func (c *byteCounter) Write(p []byte) (int, error) { *c += byteCounter(len(p)); return len(p), nil }

// sourceArchiveOfSize is a valid policy source .tar.gz of exactly size
// bytes: a Rego file and a pad file in stored (uncompressed) deflate
// blocks, the gzip header's extra field making up the last bytes.
func sourceArchiveOfSize(t *testing.T, size int) []byte {
	t.Helper()
	write := func(w io.Writer, pad int, extra int) {
		gz, err := gzip.NewWriterLevel(w, gzip.NoCompression)
		if err != nil {
			t.Fatal(err)
		}
		if extra > 0 {
			gz.Extra = bytes.Repeat([]byte{'x'}, extra)
		}
		tw := tar.NewWriter(gz)
		rego := "package cairn.v1\n\ndecision := {\"findings\": []}\n"
		if err := tw.WriteHeader(&tar.Header{Name: "policy.rego", Mode: 0o644, Size: int64(len(rego)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(rego)); err != nil {
			t.Fatal(err)
		}
		if err := tw.WriteHeader(&tar.Header{Name: "pad.bin", Mode: 0o644, Size: int64(pad), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		zeros := make([]byte, 1<<20)
		for left := pad; left > 0; left -= len(zeros) {
			if _, err := tw.Write(zeros[:min(left, len(zeros))]); err != nil {
				t.Fatal(err)
			}
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := gz.Close(); err != nil {
			t.Fatal(err)
		}
	}
	measure := func(pad int) int {
		var n byteCounter
		write(&n, pad, 0)
		return int(n)
	}
	// Stored blocks grow with their content byte for byte, plus five
	// bytes per 64 KiB block: one measurement lands close, a second
	// checks the landing.
	pad := size - 8<<10
	pad += size - measure(pad) - 512
	short := size - measure(pad)
	if short < 8 || short > 60_000 {
		t.Fatalf("could not size the archive: %d bytes short", short)
	}
	var out bytes.Buffer
	out.Grow(size)
	write(&out, pad, short-2) // the extra field costs two length bytes
	if out.Len() != size {
		t.Fatalf("archive of %d bytes, want %d", out.Len(), size)
	}
	return out.Bytes()
}

// TestPolicySourceUploadLimit (SPEC §4 POST
// /workspaces/{id}/policy-sets/{setId}/versions, rule 4, §8): a declared
// body over 100,000,000 bytes is refused 413 before the server reads it;
// a valid archive of unknown length one byte over the limit is cut there
// and refused 422 POLICY_SOURCE_ARCHIVE_TOO_LARGE, with no version
// recorded.
func TestPolicySourceUploadLimit(t *testing.T) {
	t.Parallel()
	if v1.PolicySourceUploadLimit != 100_000_000 {
		t.Fatalf("policy source limit is %d", v1.PolicySourceUploadLimit)
	}
	var read atomic.Int64
	env := apitest.New(t, func(s *apitest.Settings) {
		s.WrapListener = func(l net.Listener) net.Listener { return readCounter{Listener: l, read: &read} }
	})
	u := env.WithOrganization("uploads")
	w := newWorkspace(t, u, newProject(t, u, "p"), "sources")
	var set struct{ ID string }
	u.Mutate(http.MethodPost, "/v1/policy-sets", map[string]string{"name": "big"}).MustStatus(t, http.StatusCreated).Data(t, &set)
	path := "/v1/workspaces/" + w.ID + "/policy-sets/" + set.ID + "/versions"

	// send writes the request head and body on a connection of its own
	// (chunked when declared is negative) and returns the answer.
	send := func(declared int, body []byte) (int, string) {
		t.Helper()
		conn, err := net.Dial("tcp", strings.TrimPrefix(env.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		framing := "Transfer-Encoding: chunked"
		if declared >= 0 {
			framing = fmt.Sprintf("Content-Length: %d", declared)
		}
		go func() {
			w := bufio.NewWriterSize(conn, 256<<10)
			fmt.Fprintf(w, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/gzip\r\nCookie: %s=%s\r\nIdempotency-Key: %s\r\n%s\r\n\r\n",
				path, authserver.SessionCookie, u.Token, apitest.NewKey(), framing)
			for chunk := range slices64k(body) {
				var err error
				if declared < 0 {
					fmt.Fprintf(w, "%x\r\n", len(chunk))
				}
				if _, err = w.Write(chunk); err == nil && declared < 0 {
					_, err = w.WriteString("\r\n")
				}
				if err != nil {
					return
				}
			}
			if declared < 0 {
				fmt.Fprint(w, "0\r\n\r\n")
			}
			_ = w.Flush()
		}()
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("reading the answer: %v", err)
		}
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	versions := func() int {
		t.Helper()
		var n int
		if err := env.DB.Get(&n, `SELECT count(*) FROM policy_versions WHERE policy_set_id = $1`, set.ID); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Declared too large: refused before the body is read.
	read.Store(0)
	over := sourceArchiveOfSize(t, v1.PolicySourceUploadLimit+1)
	if st, body := send(len(over), over); st != http.StatusRequestEntityTooLarge || !strings.Contains(body, `"PAYLOAD_TOO_LARGE"`) {
		t.Fatalf("declared %d bytes: %d %s", len(over), st, body)
	}
	if n := read.Load(); n > 64<<10 {
		t.Fatalf("the server read %d bytes of a declared oversize body", n)
	}

	// Unknown length, one byte over: cut at the limit, nothing recorded.
	// An archive names its own refusal, as a configuration upload does.
	if st, body := send(-1, over); st != http.StatusUnprocessableEntity || !strings.Contains(body, `"POLICY_SOURCE_ARCHIVE_TOO_LARGE"`) {
		t.Fatalf("streamed %d bytes: %d %s", len(over), st, body)
	}
	if n := versions(); n != 0 {
		t.Fatalf("%d versions recorded from refused uploads", n)
	}
}

// slices64k yields body in 64 KiB pieces.
func slices64k(body []byte) func(func([]byte) bool) {
	return func(yield func([]byte) bool) {
		for len(body) > 0 {
			n := min(len(body), 64<<10)
			if !yield(body[:n]) {
				return
			}
			body = body[n:]
		}
	}
}
