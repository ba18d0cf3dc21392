package jsondoc

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"unicode/utf8"
)

var (
	// ErrTrailingData means something follows the document's one value.
	ErrTrailingData = errors.New("data after the JSON document")
	// ErrNUL means a string in the document holds the NUL character.
	ErrNUL = errors.New("JSON string holds a NUL character")
)

// Decode decodes doc, which must be exactly one JSON value, into v.
// Object fields v has no place for are ignored.
func Decode(doc []byte, v any) error { return decode(doc, v, false) }

// DecodeStrict is Decode refusing object fields v has no place for.
func DecodeStrict(doc []byte, v any) error { return decode(doc, v, true) }

func decode(doc []byte, v any, strict bool) error {
	dec := json.NewDecoder(bytes.NewReader(doc))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return err
	}
	// Decoder.More reports false before a closing bracket, so "{}}" would
	// pass it; only the end of the input ends the document.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return ErrTrailingData
	}
	return CheckText(doc)
}

// CheckText refuses a valid JSON document with a NUL character in any
// string, however it is escaped. Raw control characters are not valid JSON,
// so an escape is the only way to write one.
func CheckText(doc []byte) error {
	for i := 0; i < len(doc); i++ {
		if doc[i] != '\\' {
			continue
		}
		// Skip the escaped character, so that "\\u0000" (a backslash, then
		// the text u0000) is not mistaken for an escape.
		i++
		if i < len(doc) && doc[i] == 'u' && bytes.HasPrefix(doc[i+1:], []byte("0000")) {
			return ErrNUL
		}
	}
	return nil
}

// StorableText reports whether s is text PostgreSQL's text and jsonb
// columns hold: UTF-8 without NUL. Strings encoding/json decodes are always
// UTF-8; text from elsewhere (queries, files) need not be.
func StorableText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}
