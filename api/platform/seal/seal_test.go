package seal

import (
	"bytes"
	"errors"
	"testing"
)

func TestSealBindsAssociatedData(t *testing.T) {
	t.Parallel()
	s, err := NewSealer(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := s.Seal([]byte("hunter2"), []byte("var_a/1"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("hunter2")) {
		t.Fatal("plaintext visible in ciphertext")
	}
	if got, err := s.Open(sealed, []byte("var_a/1")); err != nil || string(got) != "hunter2" {
		t.Fatalf("open = %q, %v", got, err)
	}
	if _, err := s.Open(sealed, []byte("var_b/1")); err == nil {
		t.Fatal("sealed value opened under another record's identity")
	}
	other, _ := NewSealer(bytes.Repeat([]byte{8}, 32))
	if _, err := other.Open(sealed, []byte("var_a/1")); err == nil {
		t.Fatal("sealed value opened with another master key")
	}
	if _, err := NewSealer(nil); !errors.Is(err, ErrNoKey) {
		t.Fatal("missing master key accepted")
	}
	var none *Sealer
	if _, err := none.Seal([]byte("x"), nil); !errors.Is(err, ErrNoKey) {
		t.Fatal("nil sealer sealed")
	}
}

func TestStreamSealRoundTripAndTamper(t *testing.T) {
	t.Parallel()
	s, err := NewStreamSealer(bytes.Repeat([]byte{9}, 32))
	if err != nil {
		t.Fatal(err)
	}
	plain := bytes.Repeat([]byte("0123456789abcdef"), (3*SegmentBytes)/16+7) // more than three frames
	var sealed bytes.Buffer
	w, err := s.NewWriter(&sealed, []byte("state/sv_1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(plain); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	open := func(b []byte, identity string) ([]byte, error) {
		r, err := s.NewReader(bytes.NewReader(b), []byte(identity))
		if err != nil {
			return nil, err
		}
		var out bytes.Buffer
		_, err = out.ReadFrom(r)
		return out.Bytes(), err
	}
	got, err := open(sealed.Bytes(), "state/sv_1")
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("round trip: %v (len %d vs %d)", err, len(got), len(plain))
	}
	if _, err := open(sealed.Bytes(), "state/sv_2"); err == nil {
		t.Fatal("opened under another identity")
	}
	truncated := sealed.Bytes()[:sealed.Len()-SegmentBytes/2]
	if _, err := open(truncated, "state/sv_1"); err == nil {
		t.Fatal("a truncated stream opened")
	}
	flipped := bytes.Clone(sealed.Bytes())
	flipped[len(flipped)/2] ^= 1
	if _, err := open(flipped, "state/sv_1"); err == nil {
		t.Fatal("an altered stream opened")
	}
}
