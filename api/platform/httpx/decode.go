package httpx

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/jsondoc"
)

// ErrTooLarge means a body crossed its limit (declared or while streaming).
var ErrTooLarge = errors.New("request body too large")

// ErrNotJSON means a body was sent under a media type other than JSON.
var ErrNotJSON = errors.New("request body is not declared as JSON")

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
// rejecting unknown fields, trailing data and NUL characters as validation
// failures. The body must be declared as JSON: a browser sends text/plain,
// form and multipart bodies across sites without a preflight, so accepting
// them would let another site's page submit to a cookie-authenticated route.
func DecodeJSON(c *fiber.Ctx, limit int64, v any) error {
	if !declaredJSON(string(c.Request().Header.ContentType())) {
		return ErrNotJSON
	}
	body, err := ReadBody(c, limit)
	if err != nil {
		return err
	}
	if err := jsondoc.DecodeStrict(body, v); err != nil {
		return fmt.Errorf("%w: malformed JSON", fault.ErrValidation)
	}
	return nil
}

// DecodeJSONLenient is DecodeJSON for documents whose standard says
// unknown members must be ignored (RFC 7591 client metadata): it still
// requires a JSON media type, bounds the body, refuses NUL characters and
// trailing data, but accepts members v does not name.
func DecodeJSONLenient(c *fiber.Ctx, limit int64, v any) error {
	if !declaredJSON(string(c.Request().Header.ContentType())) {
		return ErrNotJSON
	}
	body, err := ReadBody(c, limit)
	if err != nil {
		return err
	}
	if err := jsondoc.Decode(body, v); err != nil {
		return fmt.Errorf("%w: malformed JSON", fault.ErrValidation)
	}
	return nil
}

// CheckQuery refuses a query whose names or values, once decoded, are not
// UTF-8 text without NUL: filters reach SQL as text parameters, which
// PostgreSQL would refuse mid-request as an internal error.
func CheckQuery(c *fiber.Ctx) error {
	valid := true
	c.Request().URI().QueryArgs().VisitAll(func(k, v []byte) {
		valid = valid && jsondoc.StorableText(string(k)) && jsondoc.StorableText(string(v))
	})
	if !valid {
		return fmt.Errorf("%w: query is not UTF-8 text without NUL", fault.ErrValidation)
	}
	return nil
}

// declaredJSON accepts application/json and any application/*+json type,
// with parameters such as a charset.
func declaredJSON(contentType string) bool {
	media, _, _ := strings.Cut(contentType, ";")
	media = strings.ToLower(strings.TrimSpace(media))
	return media == "application/json" || (strings.HasPrefix(media, "application/") && strings.HasSuffix(media, "+json"))
}
