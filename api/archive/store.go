package archive

import (
	"context"
	"errors"
	"io"

	"github.com/cairnhq/cairn/api/platform/blob"
)

// Store tees the stream into sealed storage and the validator at once, so
// an archive is read exactly once and never held whole in memory. A
// validation failure closes the pipe, which stops the copy and leaves no
// object behind; a stream over limit bytes is refused as archive_too_large.
func Store(ctx context.Context, blobs *blob.Store, key, identity string, r io.Reader, limit int64) (Manifest, blob.Digests, error) {
	pr, pw := io.Pipe()
	type inspected struct {
		manifest Manifest
		err      error
	}
	done := make(chan inspected, 1)
	go func() {
		m, err := Inspect(ctx, pr, DefaultLimits())
		if err == nil {
			// Anything after the end of the archive is ignored, but it
			// must still be read so the upload completes.
			_, err = io.Copy(io.Discard, pr)
		}
		pr.CloseWithError(errors.Join(err, io.ErrClosedPipe))
		done <- inspected{m, err}
	}()
	digests, putErr := blobs.Put(ctx, key, identity, io.TeeReader(r, pw), limit)
	pw.CloseWithError(putErr)
	res := <-done
	if errors.Is(putErr, blob.ErrTooLarge) {
		return Manifest{}, blob.Digests{}, &Error{Code: codeTooLarge}
	}
	if CodeOf(res.err) != "" {
		return Manifest{}, blob.Digests{}, res.err
	}
	if putErr != nil {
		return Manifest{}, blob.Digests{}, putErr
	}
	if res.err != nil {
		return Manifest{}, blob.Digests{}, res.err
	}
	return res.manifest, digests, nil
}
