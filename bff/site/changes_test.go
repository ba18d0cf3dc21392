package site

import (
	"encoding/json"
	"strings"
	"testing"
)

// text renders a resource's lines as the page shows them, without markup.
func text(d resourceDiff) string {
	var b strings.Builder
	for _, l := range d.Lines {
		sign := l.Sign
		if sign == "" {
			sign = " "
		}
		b.WriteString(strings.TrimRight(l.Indent()+sign+" "+l.Key+map[bool]string{true: " ", false: ""}[l.Key != ""]+l.Value+l.Note, " "))
		b.WriteString("\n")
	}
	return b.String()
}

func TestChangesReadLikeATofuPlan(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		res  changedResource
		want []string
		not  []string
	}{
		{
			name: "create with nested values, unknowns and secrets",
			res: changedResource{Address: "terraform_data.item[0]", Type: "terraform_data", Name: "item", Action: "create",
				After: json.RawMessage(`{"id":{"cairn:unknown":true},"input":{"index":0,"tags":{"env":"prod","owner":"team-a"}},"output":{"cairn:unknown":true},"triggers_replace":null,"token":{"cairn:redacted":"sensitive"}}`)},
			want: []string{
				`+ resource "terraform_data" "item" {`,
				`    + id     = (known after apply)`,
				`    + input  = {`,
				`        + index = 0`,
				`        + tags  = {`,
				`            + env   = "prod"`,
				`    + token  = (sensitive value)`,
			},
			not: []string{"triggers_replace", "cairn:", "{\"", "null"},
		},
		{
			name: "update shows only what changes",
			res: changedResource{Address: "terraform_data.cache", Action: "update",
				Before: json.RawMessage(`{"id":"abc","input":{"size":1,"zone":"a"},"list":[1,2,3]}`),
				After:  json.RawMessage(`{"id":"abc","input":{"size":2,"zone":"a"},"list":[1,2]}`)},
			want: []string{
				`~ resource "terraform_data" "cache" {`,
				`    ~ input = {`,
				`        ~ size = 1 -> 2`,
				`          # (1 unchanged attribute hidden)`,
				`    ~ list  = [`,
				`        - 3`,
				`          # (2 unchanged elements hidden)`,
				`      # (1 unchanged attribute hidden)`,
			},
			not: []string{`"zone"`},
		},
		{
			name: "replace is marked and an unknown after is not equal",
			res: changedResource{Address: "module.net.terraform_data.x", Action: "replace",
				Before: json.RawMessage(`{"id":"old","input":"a"}`), After: json.RawMessage(`{"id":{"cairn:unknown":true},"input":"b"}`)},
			want: []string{`-/+ resource "terraform_data" "x" {`, `    ~ id    = "old" -> (known after apply)`, `    ~ input = "a" -> "b"`},
		},
		{
			name: "delete names what goes",
			res:  changedResource{Address: "terraform_data.gone", Action: "delete", Before: json.RawMessage(`{"id":"x","secret":{"cairn:redacted":"sensitive"}}`)},
			want: []string{`- resource "terraform_data" "gone" {`, `    - id     = "x" -> null`, `    - secret = (sensitive value) -> null`},
		},
		{
			name: "withheld detail shows no values",
			res:  changedResource{Address: "terraform_data.big", Action: "update", Detail: "withheld", WithheldReason: "size"},
			want: []string{`~ resource "terraform_data" "big" {`},
		},
	} {
		d := diffResource(tc.res)
		got := text(d)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: missing line %q in\n%s", tc.name, w, got)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(got, n) {
				t.Errorf("%s: %q should not appear in\n%s", tc.name, n, got)
			}
		}
	}
}

func TestLongValuesFold(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 400)
	d := diffResource(changedResource{Address: "a.b", Action: "create", After: json.RawMessage(`{"policy":"` + long + `"}`)})
	var folded *diffLine
	for i := range d.Lines {
		if d.Lines[i].Folded {
			folded = &d.Lines[i]
		}
	}
	if folded == nil {
		t.Fatalf("a 400-character value is not folded:\n%s", text(d))
	}
	if short := folded.Short(); len(short) > foldAt+len("…") || !strings.HasSuffix(short, "…") || !strings.Contains(folded.Value, long) {
		t.Errorf("folded value: short %q, whole %d bytes", short, len(folded.Value))
	}
}

func TestNoOpAndReadsAreLeftOut(t *testing.T) {
	t.Parallel()
	var a planChanges
	a.Resources = []changedResource{{Address: "a.b", Action: "no-op"}, {Address: "data.c.d", Action: "read"}, {Address: "e.f", Action: "create"}}
	v := renderChanges("run_1", a)
	if len(v.Resources) != 1 || v.Resources[0].Address != "e.f" {
		t.Errorf("resources %+v, want only the create", v.Resources)
	}
}

func TestDiffMarkupEscapesValues(t *testing.T) {
	t.Parallel()
	d := diffResource(changedResource{Address: "a.b", Action: "create", After: json.RawMessage(`{"html":"<script>alert(1)</script>"}`)})
	body := string(d.Body())
	if strings.Contains(body, "<script>") || !strings.Contains(body, "&lt;script&gt;") {
		t.Errorf("diff markup does not escape a value:\n%s", body)
	}
}
