package site

import (
	"encoding/json"
	"fmt"
	"io"
	"testing"

	"github.com/cairnhq/cairn/web"
)

// BenchmarkChangesTab renders the Changes tab of 5,000 created resources,
// as the largest artifact holds, without the API.
func BenchmarkChangesTab(b *testing.B) {
	s, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	var a planChanges
	for i := range 5000 {
		a.Resources = append(a.Resources, changedResource{Address: fmt.Sprintf("terraform_data.item[%d]", i), Type: "terraform_data",
			Name: "item", Action: "create", After: json.RawMessage(fmt.Sprintf(`{"id":{"cairn:unknown":true},"input":{"index":%d},"output":{"cairn:unknown":true}}`, i))})
	}
	t, _ := s.pages.Clone()
	if _, err := t.ParseFS(web.Templates, "templates/changes.html"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		v := renderChanges("run_1", a)
		if err := t.ExecuteTemplate(io.Discard, "layout", frame{Page: v}); err != nil {
			b.Fatal(err)
		}
	}
}
