// Package jsondoc decodes the JSON documents clients send: exactly one value
// with nothing after it, and no string PostgreSQL could not store. A NUL
// character (written "\u0000") decodes into a Go string without complaint
// but is refused by every text and jsonb column, so a document carrying one
// would otherwise fail deep inside a transaction as an internal error
// instead of being refused at the edge as bad input.
package jsondoc
