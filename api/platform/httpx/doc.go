// Package httpx is the HTTP vocabulary shared by Cairn's Fiber surfaces:
// request IDs, the response envelopes of the native API, the bounded error
// object and the middleware that assigns IDs, recovers panics and logs one
// line per request. It knows nothing about domains; each surface maps domain
// errors to a Problem in its own single table.
package httpx
