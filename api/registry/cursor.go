package registry

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/cairnhq/cairn/api/platform/cursor"
)

// pageCursors issues and checks the registry's list cursors: a position in
// the list's own order (not creation time), MACed with the list and its
// filters so that a client can neither forge one nor move it elsewhere.
type pageCursors struct{ key []byte }

const macBytes = 16

func (c pageCursors) encode(list, filters string, position []string) string {
	payload, _ := json.Marshal(position)
	return base64.RawURLEncoding.EncodeToString(append(payload, c.mac(list, filters, payload)...))
}

// decode returns the position of a cursor issued for list with filters,
// nil for "" (the first page).
func (c pageCursors) decode(list, filters, token string, fields int) ([]string, error) {
	if token == "" {
		return nil, nil
	}
	invalid := ErrInvalidCursor
	if len(token) > 4*cursor.MaxLength {
		return nil, invalid
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(raw) <= macBytes || base64.RawURLEncoding.EncodeToString(raw) != token {
		return nil, invalid
	}
	payload, tag := raw[:len(raw)-macBytes], raw[len(raw)-macBytes:]
	if !hmac.Equal(tag, c.mac(list, filters, payload)) {
		return nil, invalid
	}
	var position []string
	if err := json.Unmarshal(payload, &position); err != nil || len(position) != fields {
		return nil, invalid
	}
	return position, nil
}

func (c pageCursors) mac(list, filters string, payload []byte) []byte {
	m := hmac.New(sha256.New, c.key)
	for _, part := range []string{list, filters, string(payload)} {
		fmt.Fprintf(m, "%d:%s", len(part), part)
	}
	return m.Sum(nil)[:macBytes]
}

// pageLimit bounds a requested page size like every /v1 list.
func pageLimit(limit int) int {
	switch {
	case limit <= 0:
		return cursor.DefaultLimit
	case limit > cursor.MaxLimit:
		return cursor.MaxLimit
	}
	return limit
}
