package capability

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"time"

	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/platform/secret"
)

// keyPurpose names the capability key among the keys derived from
// AUTH_SECRET. It predates policy grants; changing it would void every
// capability URL in flight.
const keyPurpose = "upload-url"

// Signer signs and checks capability grants. Its zero value has no key and
// never validates anything.
type Signer struct {
	key []byte
}

// NewSigner returns a signer keyed from AUTH_SECRET. Without a usable
// secret (config.MinSecretBytes) the signer signs nothing anyone accepts:
// Valid always fails.
func NewSigner(authSecret config.Secret) Signer {
	if len(authSecret) < config.MinSecretBytes {
		return Signer{}
	}
	return Signer{key: secret.Derive(authSecret, keyPurpose)}
}

// Sign returns the signature of a grant on method and resource until
// expires (Unix seconds).
func (s Signer) Sign(method, resource string, expires int64) string {
	m := hmac.New(sha256.New, s.key)
	fmt.Fprintf(m, "%s\n%s\n%d", method, resource, expires)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Query returns "expires=…&signature=…" for a grant lasting lifetime.
func (s Signer) Query(method, resource string, lifetime time.Duration) string {
	return s.QueryUntil(method, resource, time.Now().Add(lifetime))
}

// QueryUntil returns "expires=…&signature=…" for a grant that ends at
// deadline, rounded up to the second so it never ends early.
func (s Signer) QueryUntil(method, resource string, deadline time.Time) string {
	expires := Expires(deadline)
	return "expires=" + strconv.FormatInt(expires, 10) + "&signature=" + s.Sign(method, resource, expires)
}

// Expires is the expiry (Unix seconds) of a grant that ends at deadline,
// rounded up to the second so it never ends early.
func Expires(deadline time.Time) int64 {
	expires := deadline.Unix()
	if deadline.After(time.Unix(expires, 0)) {
		expires++
	}
	return expires
}

// Valid reports whether signature grants method on resource now: the expiry
// must parse and not have passed, and the signature is compared in constant
// time. A signer without a key accepts nothing.
func (s Signer) Valid(method, resource, expiresRaw, signature string, now time.Time) bool {
	if len(s.key) == 0 {
		return false
	}
	expires, err := strconv.ParseInt(expiresRaw, 10, 64)
	if err != nil || now.Unix() > expires {
		return false
	}
	return hmac.Equal([]byte(signature), []byte(s.Sign(method, resource, expires)))
}
