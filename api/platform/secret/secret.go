package secret

import (
	"crypto/hkdf"
	"crypto/sha256"

	"github.com/cairnhq/cairn/api/platform/config"
)

// Derive returns a 32-byte key for one purpose, derived from AUTH_SECRET with
// HKDF-SHA256. Each purpose gets an independent key, so a cursor MAC can never
// be replayed as a session hash or a fingerprint, and AUTH_SECRET itself is
// never used directly as a key.
func Derive(root config.Secret, purpose string) []byte {
	key, err := hkdf.Key(sha256.New, []byte(root.Reveal()), nil, "cairn/"+purpose+"/v1", 32)
	if err != nil {
		// Only possible for absurd output lengths; 32 is fixed.
		panic(err)
	}
	return key
}
