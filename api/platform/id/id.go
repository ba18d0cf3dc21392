package id

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"strings"
)

var encoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// RandomLength is the length of the part of every ID after its prefix and
// underscore: 128 bits in unpadded base32.
const RandomLength = 26

// New returns an opaque identifier with the given prefix, e.g. New("ws") gives
// "ws_" followed by 26 characters carrying 128 random bits. IDs say nothing
// about creation order or tenant; ordering comes from stored timestamps.
func New(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return prefix + "_" + encoding.EncodeToString(b[:])
}

// Derived returns an identifier shaped like New's whose 128 bits are the
// start of the SHA-256 of seed: the same seed always gives the same ID, for
// a resource that must be created at most once per seed. It is as opaque as
// the seed is unguessable.
func Derived(prefix string, seed []byte) string {
	sum := sha256.Sum256(seed)
	return prefix + "_" + encoding.EncodeToString(sum[:16])
}

// HasPrefix reports whether s looks like an ID issued with the given prefix.
// It is a cheap shape check for path parameters, not an existence check.
func HasPrefix(s, prefix string) bool {
	rest, ok := strings.CutPrefix(s, prefix+"_")
	if !ok || len(rest) != RandomLength {
		return false
	}
	for _, r := range rest {
		if !(r >= 'a' && r <= 'z') && !(r >= '2' && r <= '7') {
			return false
		}
	}
	return true
}
