package clientaddr

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/platform/secret"
)

// VouchHeader carries a client address that a Cairn process vouches for:
// the dashboard names the browser it signs in for. Unlike a forwarding
// header it does not depend on where the request comes from, so the
// dashboard's sign-ins are throttled per browser without any proxy
// configuration; only a holder of the vouching key (derived from
// AUTH_SECRET, which the dashboard and the API share) can make one.
const VouchHeader = "X-Cairn-Client-Address"

// vouchLifetime bounds how long a vouched address can be replayed.
const vouchLifetime = time.Minute

// VouchKey is an installation's vouching key, derived from AUTH_SECRET so
// the dashboard and the API agree on it without another setting; nil (no
// address is ever vouched for) without AUTH_SECRET.
func VouchKey(cfg config.Config) []byte {
	if !cfg.AuthReady() {
		return nil
	}
	return secret.Derive(cfg.AuthSecret, "client-address")
}

// Vouch returns the VouchHeader value naming addr at now: the address,
// the time and a MAC over both under key.
func Vouch(key []byte, addr netip.Addr, now time.Time) string {
	payload := addr.Unmap().String() + ";" + strconv.FormatInt(now.Unix(), 10)
	return payload + ";" + vouchMAC(key, payload)
}

// Vouched returns the address a VouchHeader value names, when its MAC is
// valid under key and it was made within a minute of now. Anything else,
// including an empty key, vouches for nothing.
func Vouched(key []byte, value string, now time.Time) (netip.Addr, bool) {
	if len(key) == 0 || len(value) > 128 {
		return netip.Addr{}, false
	}
	cut := strings.LastIndexByte(value, ';')
	if cut < 0 {
		return netip.Addr{}, false
	}
	payload, mac := value[:cut], value[cut+1:]
	if !hmac.Equal([]byte(mac), []byte(vouchMAC(key, payload))) {
		return netip.Addr{}, false
	}
	rawAddr, rawTime, ok := strings.Cut(payload, ";")
	if !ok {
		return netip.Addr{}, false
	}
	addr, err := netip.ParseAddr(rawAddr)
	if err != nil {
		return netip.Addr{}, false
	}
	at, err := strconv.ParseInt(rawTime, 10, 64)
	if err != nil {
		return netip.Addr{}, false
	}
	if age := now.Sub(time.Unix(at, 0)); age > vouchLifetime || age < -vouchLifetime {
		return netip.Addr{}, false
	}
	return addr.Unmap(), true
}

func vouchMAC(key []byte, payload string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("cairn/client-address\x00" + payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
