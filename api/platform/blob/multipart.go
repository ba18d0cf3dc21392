package blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

const (
	// PartSize is the size of one multipart part: S3's minimum, so an upload
	// of unknown length holds at most this much of it in memory.
	PartSize = 5 << 20
	// MaxParts is S3's ceiling on the parts of one upload.
	MaxParts = 10_000
	// abortTimeout bounds the clean-up of a failed upload, which runs even
	// when the request that started it was cancelled.
	abortTimeout = 30 * time.Second
)

// ErrTooManyParts means an upload needed more than MaxParts parts.
var ErrTooManyParts = errors.New("object needs more than 10000 parts")

// objectWriter receives an object's ciphertext; commit makes it visible,
// abort discards everything written so far.
type objectWriter interface {
	Write(p []byte) (int, error)
	commit() error
	abort()
}

// multipartWriter streams an object of unknown length to S3 one part at a
// time: one PartSize buffer, filled and sent before the next is read. An
// object smaller than one part is sent with a single PUT; nothing is visible
// under the key until commit.
type multipartWriter struct {
	ctx      context.Context
	client   *s3.Client
	bucket   string
	key      string
	buf      []byte
	uploadID *string
	parts    []types.CompletedPart
}

func newMultipartWriter(ctx context.Context, client *s3.Client, bucket, key string) *multipartWriter {
	return &multipartWriter{ctx: ctx, client: client, bucket: bucket, key: key, buf: make([]byte, 0, PartSize)}
}

func (w *multipartWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		if len(w.buf) == PartSize {
			if err := w.flush(); err != nil {
				return written, err
			}
		}
		n := copy(w.buf[len(w.buf):PartSize], p)
		w.buf = w.buf[:len(w.buf)+n]
		p = p[n:]
		written += n
	}
	return written, nil
}

// flush sends the buffered bytes as the next part, starting the multipart
// upload on the first one.
func (w *multipartWriter) flush() error {
	if len(w.parts) == MaxParts {
		return ErrTooManyParts
	}
	if w.uploadID == nil {
		out, err := w.client.CreateMultipartUpload(w.ctx, &s3.CreateMultipartUploadInput{
			Bucket:      aws.String(w.bucket),
			Key:         aws.String(w.key),
			ContentType: aws.String("application/octet-stream"),
		})
		if err != nil {
			return fmt.Errorf("starting multipart upload: %w", err)
		}
		w.uploadID = out.UploadId
	}
	number := int32(len(w.parts) + 1)
	out, err := w.client.UploadPart(w.ctx, &s3.UploadPartInput{
		Bucket:     aws.String(w.bucket),
		Key:        aws.String(w.key),
		UploadId:   w.uploadID,
		PartNumber: aws.Int32(number),
		Body:       bytes.NewReader(w.buf),
	})
	if err != nil {
		return fmt.Errorf("uploading part %d: %w", number, err)
	}
	w.parts = append(w.parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(number)})
	w.buf = w.buf[:0]
	return nil
}

func (w *multipartWriter) commit() error {
	if w.uploadID == nil {
		_, err := w.client.PutObject(w.ctx, &s3.PutObjectInput{
			Bucket:      aws.String(w.bucket),
			Key:         aws.String(w.key),
			ContentType: aws.String("application/octet-stream"),
			Body:        bytes.NewReader(w.buf),
		})
		if err != nil {
			return fmt.Errorf("storing object: %w", err)
		}
		return nil
	}
	if len(w.buf) > 0 {
		if err := w.flush(); err != nil {
			return err
		}
	}
	_, err := w.client.CompleteMultipartUpload(w.ctx, &s3.CompleteMultipartUploadInput{
		Bucket:          aws.String(w.bucket),
		Key:             aws.String(w.key),
		UploadId:        w.uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: w.parts},
	})
	if err != nil {
		w.abort()
		return fmt.Errorf("completing multipart upload: %w", err)
	}
	w.uploadID = nil
	return nil
}

// abort discards a started multipart upload so its parts stop costing
// storage. It runs detached from the request's cancellation: a cancelled
// request is the commonest reason to abort.
func (w *multipartWriter) abort() {
	w.buf = w.buf[:0]
	if w.uploadID == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), abortTimeout)
	defer cancel()
	_, _ = w.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
		Bucket:   aws.String(w.bucket),
		Key:      aws.String(w.key),
		UploadId: w.uploadID,
	})
	w.uploadID = nil
}
