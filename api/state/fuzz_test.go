package state

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/cairnhq/cairn/api/platform/jsondoc"
)

// FuzzParseState reads uploaded state the way an upload does. It must
// never fail on something that merely is not a JSON state, give the same
// result every time, and return only what the database can store: text
// that is UTF-8 without NUL, a lineage within its column bound, and
// outputs whose types and values are JSON. Outputs that failed to decode
// are not returned at all, so a mistyped "sensitive" cannot turn into a
// shown value.
func FuzzParseState(f *testing.F) {
	f.Add([]byte(`{"version":4,"terraform_version":"1.10.6","serial":3,"lineage":"9f1c2d3e-aaaa-bbbb-cccc-0123456789ab",` +
		`"outputs":{"name":{"value":"demo","type":"string"},"pw":{"value":"hunter2","type":"string","sensitive":true},` +
		`"ids":{"value":["a","b"],"type":["list","string"]}},"resources":[{"mode":"managed","type":"terraform_data","name":"a","instances":[]}],"check_results":null}`))
	f.Add([]byte(`{"outputs":{"pw":{"value":"hunter2","sensitive":"true"}}}`))
	f.Add([]byte(`{"lineage":"a\u0000b","terraform_version":"\ud800","outputs":{"a\u0000":{"value":1}}}`))
	f.Add([]byte("{\"outputs\":{\"x\":{\"value\":\"\xff\"}}}"))
	f.Add([]byte(`{"encrypted_data":"c2VjcmV0","encryption_version":"v0","meta":{"key_provider.pbkdf2.main":"e30="}}`))
	f.Add([]byte(`[1,2,3]`))
	f.Fuzz(func(t *testing.T, state []byte) {
		p, err := ParseState(bytes.NewReader(state))
		again, errAgain := ParseState(bytes.NewReader(state))
		if (err == nil) != (errAgain == nil) || !reflect.DeepEqual(p, again) {
			t.Fatalf("%q parsed as %+v (%v), then %+v (%v)", state, p, err, again, errAgain)
		}
		if err != nil && p.Outputs != nil {
			t.Fatalf("%q: outputs %v returned with %v", state, p.Outputs, err)
		}
		if err != nil && json.Valid(state) && !bytes.Contains(state, []byte(`outputs`)) {
			t.Fatalf("%q: a JSON document without outputs failed: %v", state, err)
		}
		if !jsondoc.StorableText(p.ToolVersion) || !jsondoc.StorableText(p.Lineage) || len(p.Lineage) > maxLineageBytes {
			t.Fatalf("%q: tool version %q, lineage %q", state, p.ToolVersion, p.Lineage)
		}
		for name, o := range p.Outputs {
			for _, raw := range []json.RawMessage{o.Type, o.Value} {
				if len(raw) > 0 && (!json.Valid(raw) || !utf8.Valid(raw) || bytes.IndexByte(raw, 0) >= 0) {
					t.Fatalf("%q: output %q holds %q", state, name, raw)
				}
			}
			if !jsondoc.StorableText(name) {
				t.Fatalf("%q: output name %q", state, name)
			}
		}
	})
}
