package reqid

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"regexp"
)

// Header is the response header that carries the request ID.
const Header = "X-Request-Id"

var encoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

var pattern = regexp.MustCompile(`^req_[a-z2-7]{26}$`)

type contextKey struct{}

// New returns a fresh request ID: "req_" and 26 base32 characters of
// randomness (128 bits), so IDs are unguessable and never collide in logs.
func New() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "req_" + encoding.EncodeToString(b[:])
}

// Valid reports whether s has the exact shape of an ID this service issues.
// Client-supplied IDs of any other shape are replaced, never echoed.
func Valid(s string) bool { return pattern.MatchString(s) }

// With stores a request ID in the context.
func With(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, contextKey{}, id)
}

// From returns the request ID stored in the context, or "".
func From(ctx context.Context) string {
	id, _ := ctx.Value(contextKey{}).(string)
	return id
}
