// Package clientaddr decides which address a request comes from. The TCP
// peer is the answer unless the peer is a configured trusted proxy
// (CAIRN_TRUSTED_PROXIES); only then are X-Forwarded-For or Forwarded read,
// from the right, skipping hops that are trusted proxies themselves, so a
// client cannot choose its own address by sending the header. The
// dashboard, which signs browsers in through the API, instead vouches for
// the browser's address with a short-lived MAC under a key both derive
// from AUTH_SECRET (Vouch, Vouched), so it needs no proxy configuration.
package clientaddr
