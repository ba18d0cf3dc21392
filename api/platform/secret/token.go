package secret

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
)

// tokenEncoding spells token bodies in lowercase letters and digits, so a
// token survives shells, URLs and copy-paste unquoted.
var tokenEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewToken returns a fresh bearer token: prefix and 200 random bits.
func NewToken(prefix string) (string, error) {
	raw := make([]byte, 25)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("generating token: %w", err)
	}
	return prefix + tokenEncoding.EncodeToString(raw), nil
}

// TokenHash is the keyed hash an API token is stored and looked up by.
// purpose separates kinds of tokens sharing a key: a user token's hash
// never matches a team token's.
func TokenHash(key []byte, purpose, plaintext string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(purpose + "\x00" + plaintext))
	return m.Sum(nil)
}
