package cursor

import (
	"encoding/base64"
	"encoding/binary"
	"strings"
	"testing"
	"time"
)

// FuzzDecode checks that a cursor either decodes to a position that
// re-encodes to exactly the same cursor or is refused with ErrInvalid. A
// forged MAC is all but unreachable for the fuzzer, so it also signs body
// itself with the codec's key: that reaches the parsing behind the MAC the
// way only a key holder could, and a position built from the same bytes
// must survive Encode and Decode unchanged.
func FuzzDecode(f *testing.F) {
	c := NewCodec([]byte("0123456789abcdef0123456789abcdef"))
	valid := c.Encode("runs", "status=applied", Position{CreatedAt: time.Date(2026, 11, 22, 1, 2, 3, 456789000, time.UTC), ID: "run_01jc2x"})
	raw, _ := base64.RawURLEncoding.DecodeString(valid)
	f.Add("runs", "status=applied", valid, raw[:len(raw)-macBytes])
	f.Add("projects", "", "2026-11-22T01:02:03Z|prj_x", []byte{formatVersion, 0, 0, 0, 0, 0, 0, 0, 0, 1, 'x'})
	f.Add("workspaces", "project_id=prj_1", valid+"==", []byte{formatVersion, 0x80, 0, 0, 0, 0, 0, 0, 0, 64})
	f.Add("runs", "", strings.Repeat("A", MaxLength+1), []byte{0, 0xff})

	f.Fuzz(func(t *testing.T, endpoint, filters, token string, body []byte) {
		requireCanonical(t, c, endpoint, filters, token)

		signed := base64.RawURLEncoding.EncodeToString(append(body[:len(body):len(body)], c.mac(endpoint, filters, body)...))
		pos := requireCanonical(t, c, endpoint, filters, signed)
		wellFormed := len(body) >= 10 && body[0] == formatVersion && body[9] > 0 && body[9] <= maxIDBytes && len(body) == 10+int(body[9])
		if wellFormed != (pos != nil) {
			t.Fatalf("signed body %x: decoded %v, want decoded %v", body, pos, wellFormed)
		}
		// Any decoded position is one Encode could have written, and
		// the other way round.
		if len(body) >= 9 {
			id := string(body[9:])
			p := Position{CreatedAt: time.UnixMicro(int64(binary.BigEndian.Uint64(body[1:9]))), ID: id}
			got, err := c.Decode(endpoint, filters, c.Encode(endpoint, filters, p))
			switch {
			case id == "" && err != ErrInvalid:
				t.Fatalf("a cursor without an ID decoded: %+v, %v", got, err)
			case id == "":
			case err != nil:
				t.Fatalf("an encoded position %+v was refused: %v", p, err)
			case !got.CreatedAt.Equal(p.CreatedAt) || got.ID != id[:min(len(id), maxIDBytes)]:
				t.Fatalf("position %+v came back as %+v", p, got)
			}
		}
	})
}

// requireCanonical decodes token and, when it is accepted, requires that
// it is within bounds and is the one encoding of its position; it returns
// nil for a refused token.
func requireCanonical(t *testing.T, c Codec, endpoint, filters, token string) *Position {
	t.Helper()
	pos, err := c.Decode(endpoint, filters, token)
	if err != nil {
		if err != ErrInvalid || pos != (Position{}) {
			t.Fatalf("refusal of %q is %v with %+v, want ErrInvalid and no position", token, err, pos)
		}
		return nil
	}
	if len(token) > MaxLength || pos.ID == "" || len(pos.ID) > maxIDBytes || pos.CreatedAt.Location() != time.UTC {
		t.Fatalf("accepted %q as %+v outside the bounds", token, pos)
	}
	if again := c.Encode(endpoint, filters, pos); again != token {
		t.Fatalf("accepted %q as %+v, which encodes as %q", token, pos, again)
	}
	if other, err := c.Decode(endpoint+"/", filters, token); err == nil {
		t.Fatalf("cursor for %q also decodes for %q: %+v", endpoint, endpoint+"/", other)
	}
	return &pos
}
