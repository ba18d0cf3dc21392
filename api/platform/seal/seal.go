package seal

import (
	"errors"
	"fmt"

	"github.com/tink-crypto/tink-go/v2/aead"
	"github.com/tink-crypto/tink-go/v2/aead/subtle"
)

// ErrNoKey means CAIRN_MASTER_KEY is missing or malformed; sealing and
// opening fail closed rather than storing anything in clear.
var ErrNoKey = errors.New("master key unavailable")

// Sealer encrypts small secrets with envelope encryption: a fresh AES-256-GCM
// data key per value, itself encrypted under the master key. The associated
// data binds a ciphertext to the record it belongs to, so a sealed value
// copied onto another record does not open.
type Sealer struct {
	envelope *aead.KMSEnvelopeAEAD
}

// NewSealer returns a sealer keyed by a 32-byte master key (nil: ErrNoKey).
func NewSealer(masterKey []byte) (*Sealer, error) {
	if len(masterKey) != 32 {
		return nil, ErrNoKey
	}
	kek, err := subtle.NewAESGCM(masterKey)
	if err != nil {
		return nil, fmt.Errorf("creating key-encryption key: %w", err)
	}
	return &Sealer{envelope: aead.NewKMSEnvelopeAEAD2(aead.AES256GCMKeyTemplate(), kek)}, nil
}

// Seal encrypts plaintext bound to associated.
func (s *Sealer) Seal(plaintext, associated []byte) ([]byte, error) {
	if s == nil {
		return nil, ErrNoKey
	}
	out, err := s.envelope.Encrypt(plaintext, associated)
	if err != nil {
		return nil, fmt.Errorf("sealing: %w", err)
	}
	return out, nil
}

// Open decrypts a sealed value; it fails when the ciphertext or the
// associated data differ from what was sealed.
func (s *Sealer) Open(sealed, associated []byte) ([]byte, error) {
	if s == nil {
		return nil, ErrNoKey
	}
	out, err := s.envelope.Decrypt(sealed, associated)
	if err != nil {
		return nil, fmt.Errorf("opening sealed value: %w", err)
	}
	return out, nil
}
