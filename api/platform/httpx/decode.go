package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/gofiber/fiber/v2"

	"github.com/cairnhq/cairn/api/platform/fault"
)

// ErrTooLarge means a body crossed its limit (declared or while streaming).
var ErrTooLarge = errors.New("request body too large")

// ReadBody reads a request body of at most limit bytes from the stream. A
// declared length over the limit is refused before anything is read; an
// unknown-length body is cut off one byte past the limit.
func ReadBody(c *fiber.Ctx, limit int64) ([]byte, error) {
	declared := int64(c.Request().Header.ContentLength())
	if declared > limit {
		return nil, ErrTooLarge
	}
	stream := c.Request().BodyStream()
	if stream == nil || declared == 0 {
		return nil, nil
	}
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(stream, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading request body: %w", err)
	}
	if n > limit {
		return nil, ErrTooLarge
	}
	return buf.Bytes(), nil
}

// DecodeJSON reads a bounded body and decodes one JSON document into v,
// rejecting unknown fields and trailing data as validation failures.
func DecodeJSON(c *fiber.Ctx, limit int64, v any) error {
	body, err := ReadBody(c, limit)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: malformed JSON", fault.ErrValidation)
	}
	if dec.More() {
		return fmt.Errorf("%w: trailing data after JSON document", fault.ErrValidation)
	}
	return nil
}
