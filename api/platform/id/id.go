package id

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
)

var encoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// New returns an opaque identifier with the given prefix, e.g. New("ws") gives
// "ws_" followed by 26 characters carrying 128 random bits. IDs say nothing
// about creation order or tenant; ordering comes from stored timestamps.
func New(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return prefix + "_" + encoding.EncodeToString(b[:])
}

// HasPrefix reports whether s looks like an ID issued with the given prefix.
// It is a cheap shape check for path parameters, not an existence check.
func HasPrefix(s, prefix string) bool {
	rest, ok := strings.CutPrefix(s, prefix+"_")
	if !ok || len(rest) != 26 {
		return false
	}
	for _, r := range rest {
		if !(r >= 'a' && r <= 'z') && !(r >= '2' && r <= '7') {
			return false
		}
	}
	return true
}
