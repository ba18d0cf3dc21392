package planjson

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

var (
	// ErrMalformed means the input is not plan JSON of the expected
	// shape: invalid JSON, a top level that is not an object, a repeated
	// or missing key, or trailing data.
	ErrMalformed = errors.New("malformed plan json")
	// ErrUnsupportedFormat means a plan with a format version other than
	// 1, whose masks may not mean what readers assume.
	ErrUnsupportedFormat = errors.New("unsupported plan json format version")
)

// EachChange reads one plan from dec and calls change for every element of
// resource_changes, in order, with dec positioned at that element; change
// must decode exactly one value (DecodeError classifies its failure). A
// resource_changes of null is a plan without changes. A plan without
// format_version is refused: it is not a plan (state JSON, say), and an
// empty result would wrongly read as "nothing changes".
func EachChange(ctx context.Context, dec *json.Decoder, change func(i int) error) error {
	var formatSeen, changesSeen bool
	err := eachMember(ctx, dec, func(key string) error {
		switch key {
		case "format_version":
			if formatSeen {
				return fmt.Errorf("%w: format_version given twice", ErrMalformed)
			}
			formatSeen = true
			_, err := readFormat(dec)
			return err
		case "resource_changes":
			// A second list could restate a change; neither reading is
			// safe to pick.
			if changesSeen {
				return fmt.Errorf("%w: resource_changes given twice", ErrMalformed)
			}
			changesSeen = true
			return eachElement(ctx, dec, change)
		}
		return skipValue(ctx, dec)
	})
	if err != nil {
		return err
	}
	if err := expectEOF(dec); err != nil {
		return err
	}
	if !formatSeen {
		return fmt.Errorf("%w: no format_version", ErrMalformed)
	}
	return nil
}

// eachMember reads an object from dec and calls member with each key, dec
// positioned at its value; member must read exactly that value.
func eachMember(ctx context.Context, dec *json.Decoder, member func(key string) error) error {
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	for dec.More() {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("reading plan json: %w", err)
		}
		tok, err := dec.Token()
		if err != nil {
			return DecodeError(err)
		}
		key, _ := tok.(string)
		if err := member(key); err != nil {
			return err
		}
	}
	return expectDelim(dec, '}')
}

// readFormat reads a plan's format version, refusing any but 1.x.
func readFormat(dec *json.Decoder) (string, error) {
	var version string
	if err := dec.Decode(&version); err != nil {
		return "", DecodeError(err)
	}
	if major, _, _ := strings.Cut(version, "."); major != "1" {
		if len(version) > 16 {
			version = version[:16]
		}
		return "", fmt.Errorf("%w: %q", ErrUnsupportedFormat, version)
	}
	return version, nil
}

// expectEOF checks that nothing follows the plan object.
func expectEOF(dec *json.Decoder) error {
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: data after the plan object", ErrMalformed)
	}
	return nil
}

func eachElement(ctx context.Context, dec *json.Decoder, change func(i int) error) error {
	tok, err := dec.Token()
	if err != nil {
		return DecodeError(err)
	}
	if tok == nil {
		return nil
	}
	if tok != json.Delim('[') {
		return fmt.Errorf("%w: resource_changes is not an array", ErrMalformed)
	}
	for i := 0; dec.More(); i++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("reading resource changes: %w", err)
		}
		if err := change(i); err != nil {
			return err
		}
	}
	return expectDelim(dec, ']')
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return DecodeError(err)
	}
	if tok != want {
		return fmt.Errorf("%w: expected %q", ErrMalformed, want)
	}
	return nil
}

// skipValue reads past one value token by token, so parts of the plan
// nobody reads are neither kept nor buffered whole.
func skipValue(ctx context.Context, dec *json.Decoder) error {
	depth := 0
	for n := 1; ; n++ {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("reading plan json: %w", err)
			}
		}
		tok, err := dec.Token()
		if err != nil {
			return DecodeError(err)
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}

// DecodeError tells bad input (wrapping ErrMalformed) from a failing
// reader (returned wrapped as is).
func DecodeError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syntax) || errors.As(err, &typ) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return fmt.Errorf("reading plan json: %w", err)
}
