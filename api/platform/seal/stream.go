package seal

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/tink-crypto/tink-go/v2/aead/subtle"
	streaming "github.com/tink-crypto/tink-go/v2/streamingaead/subtle"
)

// Stream format: a header naming the format and carrying the object's data
// key wrapped by the master key, then the object in authenticated frames.
var streamMagic = []byte("CAIRNSEAL1")

const (
	// SegmentBytes is the frame size of sealed streams: the most plaintext
	// held in memory while sealing or opening one object.
	SegmentBytes = 1 << 20
	dataKeyBytes = 32
	maxWrapped   = 256
)

// ErrCorrupt means a sealed stream's header is malformed or its data key
// does not unwrap for this identity.
var ErrCorrupt = errors.New("sealed stream corrupt or bound to another identity")

// StreamSealer seals artifacts of any size in constant memory: each object
// gets a fresh data key (wrapped by the master key and bound to the
// object's identity), and its bytes are encrypted with AES-256-GCM-HKDF in
// 1 MiB authenticated frames, so a truncated, reordered or altered object
// fails to open.
type StreamSealer struct {
	kek *subtle.AESGCM
}

// NewStreamSealer returns a stream sealer keyed by a 32-byte master key.
func NewStreamSealer(masterKey []byte) (*StreamSealer, error) {
	if len(masterKey) != 32 {
		return nil, ErrNoKey
	}
	kek, err := subtle.NewAESGCM(masterKey)
	if err != nil {
		return nil, fmt.Errorf("creating key-encryption key: %w", err)
	}
	return &StreamSealer{kek: kek}, nil
}

func newStreaming(dataKey []byte) (*streaming.AESGCMHKDF, error) {
	return streaming.NewAESGCMHKDF(dataKey, "SHA256", dataKeyBytes, SegmentBytes, 0)
}

// NewWriter returns a writer that seals everything written to it into dst,
// bound to identity. Close must be called to write the final frame.
func (s *StreamSealer) NewWriter(dst io.Writer, identity []byte) (io.WriteCloser, error) {
	if s == nil {
		return nil, ErrNoKey
	}
	dataKey := make([]byte, dataKeyBytes)
	if _, err := rand.Read(dataKey); err != nil {
		return nil, fmt.Errorf("generating data key: %w", err)
	}
	wrapped, err := s.kek.Encrypt(dataKey, identity)
	if err != nil {
		return nil, fmt.Errorf("wrapping data key: %w", err)
	}
	header := append(bytes.Clone(streamMagic), 0, 0)
	binary.BigEndian.PutUint16(header[len(streamMagic):], uint16(len(wrapped)))
	if _, err := dst.Write(append(header, wrapped...)); err != nil {
		return nil, err
	}
	aead, err := newStreaming(dataKey)
	if err != nil {
		return nil, err
	}
	return aead.NewEncryptingWriter(dst, identity)
}

// NewReader returns a reader of the plaintext of a sealed stream bound to
// identity. Reads fail at the first frame that does not authenticate.
func (s *StreamSealer) NewReader(src io.Reader, identity []byte) (io.Reader, error) {
	if s == nil {
		return nil, ErrNoKey
	}
	header := make([]byte, len(streamMagic)+2)
	if _, err := io.ReadFull(src, header); err != nil || !bytes.Equal(header[:len(streamMagic)], streamMagic) {
		return nil, ErrCorrupt
	}
	n := int(binary.BigEndian.Uint16(header[len(streamMagic):]))
	if n == 0 || n > maxWrapped {
		return nil, ErrCorrupt
	}
	wrapped := make([]byte, n)
	if _, err := io.ReadFull(src, wrapped); err != nil {
		return nil, ErrCorrupt
	}
	dataKey, err := s.kek.Decrypt(wrapped, identity)
	if err != nil {
		return nil, ErrCorrupt
	}
	aead, err := newStreaming(dataKey)
	if err != nil {
		return nil, err
	}
	return aead.NewDecryptingReader(src, identity)
}
