package cursor

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"time"
)

// ErrInvalid is any cursor this service did not issue for this endpoint and
// these filters: malformed, oversized, tampered, from an older format, from
// another endpoint, or a bare timestamp or delimiter string.
var ErrInvalid = errors.New("invalid cursor")

const (
	// MaxLength bounds an encoded cursor; longer input is rejected unread.
	MaxLength = 256
	// MaxLimit and MinLimit bound the page size of every cursor list.
	MinLimit = 1
	MaxLimit = 100
	// DefaultLimit is the page size when the client names none.
	DefaultLimit = 20

	formatVersion = 1
	// datedFormatVersion also carries when the cursor was issued, so a list
	// that bounds the age of its cursors can tell an outdated one.
	datedFormatVersion = 2
	macBytes           = 16
	maxIDBytes         = 64
	// clockSkew is how far in the future an issue time may lie: replicas'
	// clocks differ a little, but a cursor from the far future was not
	// issued by any of them.
	clockSkew = time.Minute
)

// Position is a place in a list ordered newest first by creation time, then
// by ID: the next page holds rows strictly older than it.
type Position struct {
	CreatedAt time.Time
	ID        string
}

// Codec issues and checks cursors with an HMAC, so a client can neither forge
// a position nor move a cursor to another endpoint or filter set.
type Codec struct {
	key []byte
	// maxAge, when set, makes the codec issue dated cursors and refuse
	// undated ones and those older than it.
	maxAge time.Duration
	now    func() time.Time
}

// NewCodec returns a codec keyed with key (at least 32 bytes).
func NewCodec(key []byte) Codec { return Codec{key: key, now: time.Now} }

// Dated returns the codec for a list whose cursors expire maxAge after they
// were issued: its cursors carry their issue time, and a cursor without one
// (the undated format every other list keeps) or older than maxAge is
// invalid. A zero maxAge returns c unchanged.
func (c Codec) Dated(maxAge time.Duration) Codec {
	c.maxAge = maxAge
	return c
}

// WithClock returns the codec reading the time from now, for tests that
// issue a cursor in the past.
func (c Codec) WithClock(now func() time.Time) Codec {
	c.now = now
	return c
}

func (c Codec) clock() time.Time {
	if c.now == nil {
		return time.Now()
	}
	return c.now()
}

// Encode returns the opaque cursor for position p of the list named endpoint
// with the given canonical filter string.
func (c Codec) Encode(endpoint, filters string, p Position) string {
	id := p.ID
	if len(id) > maxIDBytes {
		id = id[:maxIDBytes]
	}
	payload := make([]byte, 0, 1+8+8+1+len(id)+macBytes)
	if c.maxAge > 0 {
		payload = append(payload, datedFormatVersion)
		payload = binary.BigEndian.AppendUint64(payload, uint64(c.clock().UTC().Unix()))
	} else {
		payload = append(payload, formatVersion)
	}
	payload = binary.BigEndian.AppendUint64(payload, uint64(p.CreatedAt.UTC().UnixMicro()))
	payload = append(payload, byte(len(id)))
	payload = append(payload, id...)
	payload = append(payload, c.mac(endpoint, filters, payload)...)
	return base64.RawURLEncoding.EncodeToString(payload)
}

// Decode checks a cursor against the endpoint and filters it must have been
// issued for and returns its position.
func (c Codec) Decode(endpoint, filters, token string) (Position, error) {
	if len(token) == 0 || len(token) > MaxLength || len(c.key) == 0 {
		return Position{}, ErrInvalid
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	// The decoder skips CR and LF and tolerates stray bits in the last
	// character, so many strings decode alike; only the one Encode writes
	// is a cursor.
	if err != nil || len(raw) < 1+8+1+macBytes || base64.RawURLEncoding.EncodeToString(raw) != token {
		return Position{}, ErrInvalid
	}
	body, tag := raw[:len(raw)-macBytes], raw[len(raw)-macBytes:]
	if !hmac.Equal(tag, c.mac(endpoint, filters, body)) {
		return Position{}, ErrInvalid
	}
	if c.maxAge > 0 {
		// A dated list takes only dated cursors: an undated one was issued
		// before the list bounded its cursors' age, so it is outdated.
		if body[0] != datedFormatVersion || len(body) < 1+8+1+8 {
			return Position{}, ErrInvalid
		}
		issued := time.Unix(int64(binary.BigEndian.Uint64(body[1:9])), 0)
		if now := c.clock(); now.Sub(issued) > c.maxAge || issued.Sub(now) > clockSkew {
			return Position{}, ErrInvalid
		}
		body = append([]byte{formatVersion}, body[9:]...)
	}
	if body[0] != formatVersion {
		return Position{}, ErrInvalid
	}
	micros := int64(binary.BigEndian.Uint64(body[1:9]))
	idLen := int(body[9])
	// Encode never writes an ID longer than maxIDBytes, so a longer one is
	// not a cursor even under a valid MAC (a rotated or shared key).
	if len(body) != 10+idLen || idLen == 0 || idLen > maxIDBytes {
		return Position{}, ErrInvalid
	}
	return Position{CreatedAt: time.UnixMicro(micros).UTC(), ID: string(body[10:])}, nil
}

func (c Codec) mac(endpoint, filters string, payload []byte) []byte {
	m := hmac.New(sha256.New, c.key)
	// Length-prefixing each part keeps ("a","bc") and ("ab","c") apart.
	for _, part := range [][]byte{[]byte(endpoint), []byte(filters), payload} {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(part)))
		m.Write(n[:])
		m.Write(part)
	}
	return m.Sum(nil)[:macBytes]
}
