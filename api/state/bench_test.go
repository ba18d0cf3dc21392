package state_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/state"
)

// BenchmarkParseState parses a state of the 100 MB limit, as every upload
// does beside its blob write: the parse runs in step with the write
// (through a pipe), so its speed bounds the upload's.
func BenchmarkParseState(b *testing.B) {
	var doc bytes.Buffer
	doc.WriteString(`{"version":4,"terraform_version":"1.10.6","serial":1,"lineage":"l","outputs":{"o":{"value":"v","type":"string"}},"resources":[`)
	item := `{"mode":"managed","type":"terraform_data","name":"r","instances":[{"attributes":{"input":"` + strings.Repeat("x", 200) + `","n":[1,2,{"k":true}]}}]}`
	n := 0
	for doc.Len() < state.MaxStateBytes-len(item)-3 {
		if n > 0 {
			doc.WriteByte(',')
		}
		doc.WriteString(item)
		n++
	}
	doc.WriteString(`]}`)
	b.SetBytes(int64(doc.Len()))
	for b.Loop() {
		p, err := state.ParseState(bytes.NewReader(doc.Bytes()))
		if err != nil || !p.ResourcesCounted || p.ResourceCount != n {
			b.Fatal(p.ResourceCount, p.ResourcesCounted, err)
		}
	}
}
