package cursor

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

func TestCursorRoundTrip(t *testing.T) {
	t.Parallel()
	c := NewCodec([]byte("0123456789abcdef0123456789abcdef"))
	pos := Position{CreatedAt: time.Date(2026, 11, 22, 1, 2, 3, 456789000, time.UTC), ID: "prj_abc"}
	token := c.Encode("projects", "", pos)
	got, err := c.Decode("projects", "", token)
	if err != nil {
		t.Fatal(err)
	}
	if !got.CreatedAt.Equal(pos.CreatedAt) || got.ID != pos.ID {
		t.Fatalf("decoded %+v, want %+v", got, pos)
	}
}

func TestCursorRejections(t *testing.T) {
	t.Parallel()
	c := NewCodec([]byte("0123456789abcdef0123456789abcdef"))
	other := NewCodec([]byte("fedcba9876543210fedcba9876543210"))
	pos := Position{CreatedAt: time.Now(), ID: "run_x"}
	valid := c.Encode("runs", "status=", pos)
	raw, _ := base64.RawURLEncoding.DecodeString(valid)
	tampered := append([]byte(nil), raw...)
	tampered[3] ^= 0x01
	oldFormat := append([]byte(nil), raw...)
	oldFormat[0] = 0

	for name, tc := range map[string]struct{ endpoint, filters, token string }{
		"empty":              {"runs", "status=", ""},
		"oversized":          {"runs", "status=", strings.Repeat("A", MaxLength+1)},
		"not base64":         {"runs", "status=", "not a cursor!"},
		"tampered":           {"runs", "status=", base64.RawURLEncoding.EncodeToString(tampered)},
		"other endpoint":     {"workspaces", "status=", valid},
		"other filters":      {"runs", "status=applied", valid},
		"other key":          {"runs", "status=", other.Encode("runs", "status=", pos)},
		"bare timestamp":     {"runs", "status=", "2026-11-22T01:02:03Z"},
		"unix timestamp":     {"runs", "status=", "1795000000"},
		"delimiter cursor":   {"runs", "status=", "2026-11-22T01:02:03Z|run_x"},
		"older format":       {"runs", "status=", base64.RawURLEncoding.EncodeToString(oldFormat)},
		"truncated":          {"runs", "status=", valid[:len(valid)-4]},
		"standard base64":    {"runs", "status=", base64.StdEncoding.EncodeToString(raw)},
		"valid with padding": {"runs", "status=", valid + "=="},
		"valid with a CR":    {"runs", "status=", valid[:5] + "\r" + valid[5:]},
		"valid with a LF":    {"runs", "status=", valid + "\n"},
	} {
		if _, err := c.Decode(tc.endpoint, tc.filters, tc.token); err != ErrInvalid {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
	if _, err := c.Decode("runs", "status=", valid); err != nil {
		t.Fatalf("the valid cursor itself was rejected: %v", err)
	}
}

func TestNextTrimsAndPointsAtLastRow(t *testing.T) {
	t.Parallel()
	c := NewCodec([]byte("0123456789abcdef0123456789abcdef"))
	page := Page{Limit: 2}
	base := time.Now().UTC()
	rows := []Position{{base, "c"}, {base.Add(-time.Second), "b"}, {base.Add(-2 * time.Second), "a"}}
	got, next := Next(c, "x", "", page, rows, func(p Position) Position { return p })
	if len(got) != 2 || next == nil {
		t.Fatalf("got %d rows, next %v", len(got), next)
	}
	pos, err := c.Decode("x", "", *next)
	if err != nil || pos.ID != "b" {
		t.Fatalf("next cursor points at %+v (%v), want b", pos, err)
	}
	if _, last := Next(c, "x", "", page, rows[:2], func(p Position) Position { return p }); last != nil {
		t.Fatal("last page must have no next cursor")
	}
}

// A dated list's cursor expires: within its age it pages, past it (or
// issued in the future, or undated, as every cursor was before the list
// bounded their age) it is invalid, while undated lists keep taking the
// undated cursors they always issued.
func TestDatedCursorRefusesOutdatedOnes(t *testing.T) {
	t.Parallel()
	key := []byte("0123456789abcdef0123456789abcdef")
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	at := func(t time.Time) func() time.Time { return func() time.Time { return t } }
	dated := NewCodec(key).Dated(time.Hour).WithClock(at(now))
	undated := NewCodec(key)
	pos := Position{CreatedAt: now.Add(-time.Minute), ID: "run_x"}

	fresh := dated.WithClock(at(now.Add(-59*time.Minute))).Encode("runs", "", pos)
	if got, err := dated.Decode("runs", "", fresh); err != nil || got.ID != pos.ID || !got.CreatedAt.Equal(pos.CreatedAt) {
		t.Fatalf("a cursor within its age = %+v, %v", got, err)
	}
	for name, token := range map[string]string{
		"outdated":          dated.WithClock(at(now.Add(-61*time.Minute))).Encode("runs", "", pos),
		"from the future":   dated.WithClock(at(now.Add(2*time.Minute))).Encode("runs", "", pos),
		"undated":           undated.Encode("runs", "", pos),
		"other endpoint":    dated.Encode("projects", "", pos),
		"bare timestamp":    "2026-11-29T11:00:00Z",
		"delimiter":         "2026-11-29T11:00:00Z|run_x",
		"oversized":         strings.Repeat("A", MaxLength+1),
		"truncated":         fresh[:len(fresh)-3],
		"dated, other list": dated.WithClock(at(now)).Encode("runs", "workspace=ws_1", pos),
	} {
		if _, err := dated.Decode("runs", "", token); err != ErrInvalid {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
	// Undated lists refuse dated cursors (another format) and keep
	// accepting their own.
	if _, err := undated.Decode("runs", "", fresh); err != ErrInvalid {
		t.Fatalf("an undated list took a dated cursor: %v", err)
	}
	if _, err := undated.Decode("projects", "", undated.Encode("projects", "", pos)); err != nil {
		t.Fatalf("an undated cursor stopped working: %v", err)
	}
}
