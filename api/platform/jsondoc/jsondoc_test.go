package jsondoc

import (
	"errors"
	"testing"
)

func TestDecode(t *testing.T) {
	t.Parallel()
	type doc struct {
		Name string `json:"name"`
	}
	for _, tc := range []struct {
		in      string
		strict  bool
		wantErr error // nil: accepted; errAny: any error
	}{
		{in: `{"name":"a"}`},
		{in: " {\"name\":\"a\"}\n\t"},
		{in: `{"name":"a","other":1}`},
		{in: `{"name":"a","other":1}`, strict: true, wantErr: errAny},
		{in: `{"name":"a"}}`, wantErr: ErrTrailingData},
		{in: `{"name":"a"}]`, wantErr: ErrTrailingData},
		{in: `{"name":"a"}{}`, wantErr: ErrTrailingData},
		{in: `{"name":"a"} x`, wantErr: ErrTrailingData},
		{in: `{"name":"a\u0000"}`, wantErr: ErrNUL},
		{in: `{"na\u0000me":"a"}`, wantErr: ErrNUL},
		{in: `{"name":"\\\u0000"}`, wantErr: ErrNUL},
		{in: `{"name":"\\u0000"}`},
		{in: `{"name":"\u00000"}`, wantErr: ErrNUL},
		{in: `{"name":"\u0001"}`},
		{in: ``, wantErr: errAny},
	} {
		var v doc
		decode := Decode
		if tc.strict {
			decode = DecodeStrict
		}
		err := decode([]byte(tc.in), &v)
		switch {
		case tc.wantErr == nil && err != nil:
			t.Errorf("%q: %v, want accepted", tc.in, err)
		case tc.wantErr == errAny && err == nil:
			t.Errorf("%q accepted, want refused", tc.in)
		case tc.wantErr != nil && tc.wantErr != errAny && !errors.Is(err, tc.wantErr):
			t.Errorf("%q: %v, want %v", tc.in, err, tc.wantErr)
		}
	}
}

var errAny = errors.New("any error")
