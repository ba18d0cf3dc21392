// Package clientaddr decides which address a request comes from. The TCP
// peer is the answer unless the peer is a configured trusted proxy
// (CAIRN_TRUSTED_PROXIES); only then are X-Forwarded-For or Forwarded read,
// from the right, skipping hops that are trusted proxies themselves, so a
// client cannot choose its own address by sending the header.
package clientaddr
