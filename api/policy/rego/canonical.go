package rego

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Digest returns the lowercase hex SHA-256 of b, the form every policy
// digest (manifest, bundle, input, result) takes.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// CanonicalJSON encodes v the one way digests are taken over: object keys
// sorted (encoding/json sorts map keys; the structs of this package declare
// their fields in sorted order), no insignificant whitespace, no trailing
// newline, and no HTML escaping, which would make "<" in a resource address
// hash differently from the same text encoded elsewhere.
func CanonicalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encoding canonical json: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
