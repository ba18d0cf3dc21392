// Package fanout hands a copy of a stream to a consumer on its own
// goroutine through a small, bounded queue of buffers. A large upload is
// hashed, sealed and written by one goroutine while others parse it or
// compute a second digest: with io.Pipe each write waits until the other
// side has consumed it, so the two take turns on the bytes instead of
// sharing the machine's cores.
package fanout
