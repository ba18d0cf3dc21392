package archive

import (
	"context"
	"errors"
	"io"

	"github.com/cairnhq/cairn/api/platform/blob"
	"github.com/cairnhq/cairn/api/platform/fanout"
)

// Store tees the stream into sealed storage and the validator at once, so
// an archive is read exactly once and never held whole in memory. The
// validator reads through a bounded queue (fanout) beside the write; its
// failure fails the next write, which stops the copy. An archive shorter
// than the queue can be stored whole before its refusal, so on any error
// the caller deletes key. A stream over limit bytes is refused as
// archive_too_large.
func Store(ctx context.Context, blobs *blob.Store, key, identity string, r io.Reader, limit int64) (Manifest, blob.Digests, error) {
	var manifest Manifest
	// Anything after the end of the archive is ignored: the branch
	// discards it once Inspect returns.
	inspector := fanout.Start(func(r io.Reader) error {
		m, err := Inspect(ctx, r, DefaultLimits())
		manifest = m
		return err
	})
	digests, putErr := blobs.Put(ctx, key, identity, io.TeeReader(r, inspector), limit)
	inspectErr := inspector.CloseWithError(putErr)
	switch {
	case errors.Is(putErr, blob.ErrTooLarge):
		return Manifest{}, blob.Digests{}, &Error{Code: codeTooLarge}
	case putErr != nil && CodeOf(putErr) == "":
		// The upload failed on its own (the client went away, storage
		// failed): the validator saw a stream cut short, which says nothing
		// about the archive the client meant to send, so the caller gets
		// the upload's error and may let the client try again.
		return Manifest{}, blob.Digests{}, putErr
	case inspectErr != nil:
		// The validator refused first (Put failed with its refusal wrapped)
		// or refused an archive Put stored whole.
		return Manifest{}, blob.Digests{}, inspectErr
	}
	return manifest, digests, nil
}
