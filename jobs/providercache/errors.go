package providercache

import "errors"

// ErrTampered means a cached package no longer has the hash it was
// installed with.
var ErrTampered = errors.New("cached provider package does not match its recorded checksum")

// ErrUnverified means a mirror package has no checksum the mirror publishes
// for it, or does not match one.
var ErrUnverified = errors.New("provider package does not match the checksums its mirror publishes")
