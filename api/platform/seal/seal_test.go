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
