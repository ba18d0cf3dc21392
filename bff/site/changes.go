package site

import (
	"bytes"
	"encoding/json"
	"html"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The Changes tab reads like `tofu plan`: one block per resource, its
// attributes nested with +, ~ and - marks, unchanged attributes counted
// rather than shown, sensitive parts as "(sensitive value)" and unknown ones
// as "(known after apply)". The plan-diff artifact marks those parts with
// the objects below.
const (
	redactedMarker = "cairn:redacted"
	unknownMarker  = "cairn:unknown"
)

// foldAt is the length past which a value is folded behind a disclosure.
const foldAt = 160

// diffLine is one line of a resource's rendered diff.
type diffLine struct {
	Depth int
	// Sign is "+", "-", "~", "-/+" or "" (context).
	Sign string
	// Key is the attribute name with its padding, or "" for a closing
	// bracket or a list element.
	Key string
	// Value is the text after "key = ": a value, "old -> new", or an
	// opening bracket.
	Value string
	// Folded is set when Value is long: the page shows its start and
	// expands to the whole.
	Folded bool
	// Note is a muted comment ("# (3 unchanged attributes hidden)").
	Note string
}

// Short is the start of a folded value.
func (l diffLine) Short() string {
	cut := foldAt
	for cut > 0 && !utf8.RuneStart(l.Value[cut]) {
		cut--
	}
	return l.Value[:cut] + "…"
}

// Indent is the line's leading space, four per depth.
func (l diffLine) Indent() string { return strings.Repeat("    ", l.Depth) }

// SignClass names the line's colour.
func (l diffLine) SignClass() string {
	switch l.Sign {
	case "+":
		return "d-add"
	case "-":
		return "d-del"
	case "~":
		return "d-upd"
	case "-/+":
		return "d-rep"
	}
	return "d-ctx"
}

// resourceDiff is one resource's block.
type resourceDiff struct {
	Address  string
	Provider string
	Action   string
	// Heading is tofu's sentence: "will be created", "must be replaced".
	Heading string
	// Withheld says why the values are not shown, when they are not.
	Withheld string
	Lines    []diffLine
}

// diffResource renders one artifact resource.
func diffResource(c changedResource) resourceDiff {
	d := resourceDiff{Address: c.Address, Provider: c.Provider, Action: c.Action}
	sign := map[string]string{"create": "+", "update": "~", "delete": "-", "replace": "-/+"}[c.Action]
	d.Heading = map[string]string{"create": "will be created", "update": "will be updated in-place",
		"delete": "will be destroyed", "replace": "must be replaced"}[c.Action]
	if d.Heading == "" {
		d.Heading = "will change (" + c.Action + ")"
	}
	switch c.WithheldReason {
	case "":
	case "size":
		d.Withheld = "Its attributes are withheld: the plan's change list was too large to show them."
	default:
		d.Withheld = "Its attributes are withheld: their sensitivity could not be resolved."
	}
	kind, name := c.Type, c.Name
	if kind == "" {
		kind, name = typeAndName(c.Address)
	}
	open := "resource " + strconv.Quote(kind) + " " + strconv.Quote(name) + " {"
	d.Lines = append(d.Lines, diffLine{Sign: sign, Value: open})
	if d.Withheld == "" {
		before, after := decode(c.Before), decode(c.After)
		var w differ
		switch c.Action {
		case "create":
			w.object(1, "+", nil, after)
		case "delete":
			w.object(1, "-", before, nil)
		default:
			w.object(1, "~", before, after)
		}
		d.Lines = append(d.Lines, w.lines...)
	}
	d.Lines = append(d.Lines, diffLine{Value: "}"})
	return d
}

// typeAndName splits the last step of a resource address
// ("module.a.aws_s3_bucket.logs[0]") into type and name.
func typeAndName(address string) (string, string) {
	parts := strings.Split(address, ".")
	if len(parts) < 2 {
		return address, ""
	}
	name := parts[len(parts)-1]
	if i := strings.IndexByte(name, '['); i > 0 {
		name = name[:i]
	}
	return parts[len(parts)-2], name
}

// decode reads a value, keeping numbers exact; absent or invalid is nil.
func decode(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	return v
}

type differ struct{ lines []diffLine }

func (w *differ) add(l diffLine) {
	l.Folded = len(l.Value) > foldAt+16
	w.lines = append(w.lines, l)
}

// object writes the attributes of an object (sign "+" or "-": all of one
// side; "~": the differences of both).
func (w *differ) object(depth int, sign string, before, after any) {
	b, _ := before.(map[string]any)
	a, _ := after.(map[string]any)
	keys := unionKeys(b, a)
	width, unchanged := 0, 0
	shown := keys[:0:0]
	for _, k := range keys {
		bv, inB := b[k]
		av, inA := a[k]
		switch {
		case sign == "+" && (!inA || av == nil):
			continue
		case sign == "-" && (!inB || bv == nil):
			continue
		case sign == "~" && inA && inB && equal(bv, av):
			unchanged++
			continue
		case sign == "~" && bv == nil && av == nil:
			continue
		}
		shown = append(shown, k)
		width = max(width, len(attrKey(k)))
	}
	for _, k := range shown {
		key := attrKey(k)
		key += strings.Repeat(" ", width-len(key))
		w.attribute(depth, sign, key, b[k], a[k])
	}
	if unchanged > 0 {
		w.add(diffLine{Depth: depth, Note: "# (" + plural(unchanged, "unchanged attribute") + " hidden)"})
	}
}

// attribute writes one named value (key "" for a list element).
func (w *differ) attribute(depth int, sign, key string, before, after any) {
	if sign == "~" {
		switch {
		case before == nil:
			sign = "+"
		case after == nil:
			sign = "-"
		}
	}
	lhs := key
	if key != "" {
		lhs += " = "
	}
	switch sign {
	case "+":
		w.value(depth, "+", lhs, after)
	case "-":
		w.value(depth, "-", lhs, before)
	default:
		bm, bObj := nested(before)
		am, aObj := nested(after)
		if bObj && aObj && bm == am {
			if bm == "{" {
				w.add(diffLine{Depth: depth, Sign: "~", Key: key, Value: eqOpen(key, "{")})
				w.object(depth+1, "~", before, after)
				w.add(diffLine{Depth: depth, Value: "}"})
				return
			}
			w.add(diffLine{Depth: depth, Sign: "~", Key: key, Value: eqOpen(key, "[")})
			w.list(depth+1, before.([]any), after.([]any))
			w.add(diffLine{Depth: depth, Value: "]"})
			return
		}
		w.add(diffLine{Depth: depth, Sign: "~", Key: key, Value: eqPrefix(key) + scalar(before) + " -> " + scalar(after)})
	}
}

func eqPrefix(key string) string {
	if key == "" {
		return ""
	}
	return "= "
}

func eqOpen(key, bracket string) string { return eqPrefix(key) + bracket }

// value writes a whole value on one side: a scalar on one line, an object
// or list opened, filled and closed.
func (w *differ) value(depth int, sign, lhs string, v any) {
	key := strings.TrimSuffix(lhs, " = ")
	switch t := v.(type) {
	case map[string]any:
		if _, marked := marker(t); !marked {
			w.add(diffLine{Depth: depth, Sign: sign, Key: key, Value: eqOpen(key, "{")})
			if sign == "+" {
				w.object(depth+1, "+", nil, t)
			} else {
				w.object(depth+1, "-", t, nil)
			}
			w.add(diffLine{Depth: depth, Value: "}"})
			return
		}
	case []any:
		w.add(diffLine{Depth: depth, Sign: sign, Key: key, Value: eqOpen(key, "[")})
		for _, e := range t {
			w.value(depth+1, sign, "", e)
		}
		w.add(diffLine{Depth: depth, Value: "]"})
		return
	}
	text := scalar(v)
	if sign == "-" && key != "" {
		text += " -> null"
	}
	w.add(diffLine{Depth: depth, Sign: sign, Key: key, Value: eqPrefix(key) + text})
}

// list compares two lists element by element: equal elements are counted,
// different ones compared in place, the longer list's tail added or
// removed.
func (w *differ) list(depth int, before, after []any) {
	unchanged := 0
	for i := 0; i < max(len(before), len(after)); i++ {
		switch {
		case i >= len(before):
			w.value(depth, "+", "", after[i])
		case i >= len(after):
			w.value(depth, "-", "", before[i])
		case equal(before[i], after[i]):
			unchanged++
		default:
			w.attribute(depth, "~", "", before[i], after[i])
		}
	}
	if unchanged > 0 {
		w.add(diffLine{Depth: depth, Note: "# (" + plural(unchanged, "unchanged element") + " hidden)"})
	}
}

// nested reports whether v is an object ("{") or list ("[") to descend
// into; markers are scalars.
func nested(v any) (string, bool) {
	switch t := v.(type) {
	case map[string]any:
		if _, marked := marker(t); marked {
			return "", false
		}
		return "{", true
	case []any:
		return "[", true
	}
	return "", false
}

// marker recognizes the artifact's redaction and unknown markers.
func marker(m map[string]any) (string, bool) {
	if len(m) != 1 {
		return "", false
	}
	if _, ok := m[redactedMarker]; ok {
		return "(sensitive value)", true
	}
	if _, ok := m[unknownMarker]; ok {
		return "(known after apply)", true
	}
	return "", false
}

// scalar renders a value on one line the way tofu prints it.
func scalar(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case string:
		if strings.Contains(t, "\n") {
			return "<<-EOT " + strconv.Quote(t) + " EOT"
		}
		return strconv.Quote(t)
	case json.Number:
		return t.String()
	case bool:
		return strconv.FormatBool(t)
	case map[string]any:
		if text, ok := marker(t); ok {
			return text
		}
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return "(unreadable value)"
	}
	return string(raw)
}

// attrKey quotes a key that is not a plain identifier.
func attrKey(k string) string {
	for i, r := range k {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return strconv.Quote(k)
		}
	}
	if k == "" {
		return `""`
	}
	return k
}

func unionKeys(a, b map[string]any) []string {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// equal compares two decoded values; markers compare as values, so an
// unknown after is never equal to a known before.
func equal(a, b any) bool {
	ra, errA := json.Marshal(a)
	rb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ra, rb)
}

// changesView is the rendered Changes tab.
type changesView struct {
	RunID     string
	Resources []resourceDiff
	Truncated bool
	Total     int
	Counts    struct{ Add, Change, Destroy int }
	Error     string
}

// renderChanges turns the artifact into the tab's blocks: no-op and
// read-only resources are left out.
func renderChanges(id string, a planChanges) changesView {
	v := changesView{RunID: id, Truncated: a.Truncated, Total: a.TotalResources}
	v.Counts.Add, v.Counts.Change, v.Counts.Destroy = a.Counts.Add, a.Counts.Change, a.Counts.Destroy
	for _, res := range a.Resources {
		if res.Action == "no-op" || res.Action == "read" {
			continue
		}
		v.Resources = append(v.Resources, diffResource(res))
	}
	return v
}

// planChanges is the cairn.plan-diff/v1 artifact as the page reads it.
type planChanges struct {
	Resources []changedResource `json:"resources"`
	Truncated bool              `json:"truncated"`
	Counts    struct {
		Add     int `json:"add"`
		Change  int `json:"change"`
		Destroy int `json:"destroy"`
	} `json:"counts"`
	TotalResources int `json:"total_resources"`
}

type changedResource struct {
	Address        string          `json:"address"`
	Type           string          `json:"type"`
	Name           string          `json:"name"`
	Provider       string          `json:"provider"`
	Action         string          `json:"action"`
	Before         json.RawMessage `json:"before"`
	After          json.RawMessage `json:"after"`
	Detail         string          `json:"detail"`
	WithheldReason string          `json:"withheld_reason"`
}

// runChanges renders the plan stage's Changes tab from the plan-diff
// artifact, after the run's own launch-access probe.
func (s *Site) runChanges(w http.ResponseWriter, r *http.Request, token string) {
	id := r.PathValue("id")
	f := s.frame(r, "Changes")
	var artifact planChanges
	if err := s.api.Call(r.Context(), token, http.MethodGet, "/v1/runs/"+url.PathEscape(id)+"/plan-changes", nil, &artifact); err != nil {
		f.Page = changesView{RunID: id, Error: "Changes are unavailable right now."}
		s.render(w, r, http.StatusOK, "changes.html", f)
		return
	}
	f.Page = renderChanges(id, artifact)
	s.render(w, r, http.StatusOK, "changes.html", f)
}

// Body is the resource's lines as markup, built here rather than by the
// template: a 5,000-resource plan has tens of thousands of lines, and one
// template call per resource keeps the tab's render a small part of its
// time to first byte. Every value is escaped.
func (d resourceDiff) Body() template.HTML {
	var b strings.Builder
	for _, l := range d.Lines {
		b.WriteString(`<div class="dl `)
		b.WriteString(l.SignClass())
		b.WriteString(`">`)
		b.WriteString(l.Indent())
		b.WriteString(`<span class="sign">`)
		b.WriteString(html.EscapeString(l.Sign))
		b.WriteString(`</span>`)
		switch {
		case l.Note != "":
			b.WriteString(`<span class="muted">` + html.EscapeString(l.Note) + `</span>`)
		default:
			if l.Key != "" {
				b.WriteString(html.EscapeString(l.Key) + " ")
			}
			if l.Folded {
				b.WriteString(`<details class="fold"><summary>` + html.EscapeString(l.Short()) + `</summary><span class="full">` +
					html.EscapeString(l.Value) + `</span></details>`)
			} else {
				b.WriteString(html.EscapeString(l.Value))
			}
		}
		b.WriteString("</div>\n")
	}
	return template.HTML(b.String())
}
