package planjson

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/cairnhq/cairn/api/platform/mask"
)

// WriteRedacted writes a plan's redacted JSON to w: the document OpenTofu's
// cloud backend decodes for `tofu show` of a saved cloud plan (its
// jsonformat.Plan). From plan (plan JSON as `tofu show -json` writes it)
// it takes the format version, output changes, resource changes, resource
// drift and relevant attributes, and leaves out everything else whole
// (variables, planned values, prior state, configuration, checks); from
// schemas (`tofu providers schema -json`) it takes the format version and
// the schemas of the providers and resource types those changes name,
// which the renderer needs for every resource it shows.
//
// Every value under a sensitivity mask, and every value or key holding one
// of secrets in any spelling (a provider can copy a sensitive input into
// an attribute it does not mark sensitive), is replaced by a placeholder
// and marked sensitive, so the CLI shows "(sensitive value)". A mask that
// does not fit its value hides the whole value. Placeholders keep the JSON
// type of what they replace (the renderer reads numbers and booleans by
// type) and are an HMAC, under a key made for this document and then
// dropped, of the value and its place: the same value at the same place
// gets the same placeholder before and after a change, so the renderer
// still tells an update from a no-op, and nothing of the value can be
// recovered. One resource change and one provider schema are held at a
// time.
func WriteRedacted(ctx context.Context, w io.Writer, plan, schemas io.Reader, secrets []string) error {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("making the placeholder key: %w", err)
	}
	rd := &redactor{key: key, forms: mask.Forms(secrets), used: map[string]*typesUsed{}}
	out := &jsonWriter{w: bufio.NewWriter(w)}
	out.raw("{")
	fields := 0
	field := func(name string) {
		if fields > 0 {
			out.raw(",")
		}
		fields++
		out.value(name)
		out.raw(":")
	}
	planDec := json.NewDecoder(plan)
	planDec.UseNumber()
	if err := rd.planSections(ctx, planDec, out, field); err != nil {
		return err
	}
	if err := rd.schemaSections(ctx, json.NewDecoder(schemas), out, field); err != nil {
		return err
	}
	out.raw("}")
	return out.flush()
}

// redactor carries what one redacted document needs: the placeholder key,
// the secrets' spellings, and the provider types its changes name.
type redactor struct {
	key   []byte
	forms []string
	used  map[string]*typesUsed
}

// typesUsed are the resource and data source types of one provider that
// the plan's changes name.
type typesUsed struct {
	resources, dataSources map[string]bool
}

// planSections copies the plan's renderable sections, redacted, and
// skips the rest.
func (rd *redactor) planSections(ctx context.Context, dec *json.Decoder, out *jsonWriter, field func(string)) error {
	seen := map[string]bool{}
	err := eachMember(ctx, dec, func(key string) error {
		// A restated section could hide what the first one showed.
		if seen[key] {
			return fmt.Errorf("%w: %q given twice", ErrMalformed, key)
		}
		seen[key] = true
		switch key {
		case "format_version":
			version, err := readFormat(dec)
			if err != nil {
				return err
			}
			field("plan_format_version")
			out.value(version)
			return nil
		case "resource_changes", "resource_drift":
			field(key)
			return rd.resourceChanges(ctx, dec, out, key)
		case "output_changes":
			field(key)
			return rd.outputChanges(ctx, dec, out)
		case "relevant_attributes":
			var attrs any
			if err := dec.Decode(&attrs); err != nil {
				return DecodeError(err)
			}
			field(key)
			out.value(rd.scrub(key, attrs))
			return nil
		}
		return skipValue(ctx, dec)
	})
	if err != nil {
		return err
	}
	if err := expectEOF(dec); err != nil {
		return err
	}
	if !seen["format_version"] {
		return fmt.Errorf("%w: no format_version", ErrMalformed)
	}
	return nil
}

// resourceChanges copies a list of resource changes (or drift), one
// element at a time.
func (rd *redactor) resourceChanges(ctx context.Context, dec *json.Decoder, out *jsonWriter, section string) error {
	out.raw("[")
	err := eachElement(ctx, dec, func(i int) error {
		var rc map[string]any
		if err := dec.Decode(&rc); err != nil {
			return DecodeError(err)
		}
		if rc == nil {
			return fmt.Errorf("%w: %s element %d is not an object", ErrMalformed, section, i)
		}
		if i > 0 {
			out.raw(",")
		}
		out.value(rd.resourceChange(section, rc))
		return nil
	})
	out.raw("]")
	return err
}

// resourceChange redacts one resource change and notes its provider type.
func (rd *redactor) resourceChange(section string, rc map[string]any) map[string]any {
	provider, _ := rc["provider_name"].(string)
	typ, _ := rc["type"].(string)
	mode, _ := rc["mode"].(string)
	rd.use(provider, mode, typ)
	address, _ := rc["address"].(string)
	deposed, _ := rc["deposed"].(string)
	place := section + "\x00" + address + "\x00" + deposed
	for k, v := range rc {
		if change, ok := v.(map[string]any); ok && k == "change" {
			rc[k] = rd.change(place, change)
			continue
		}
		rc[k] = rd.scrub(place+"\x00"+k, v)
	}
	return rc
}

func (rd *redactor) use(provider, mode, typ string) {
	u := rd.used[provider]
	if u == nil {
		u = &typesUsed{resources: map[string]bool{}, dataSources: map[string]bool{}}
		rd.used[provider] = u
	}
	if mode == "data" {
		u.dataSources[typ] = true
	} else {
		u.resources[typ] = true
	}
}

// outputChanges copies the output changes, one output at a time.
func (rd *redactor) outputChanges(ctx context.Context, dec *json.Decoder, out *jsonWriter) error {
	if empty, err := openObject(dec, out, "output_changes"); empty || err != nil {
		return err
	}
	for i := 0; dec.More(); i++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("reading output changes: %w", err)
		}
		tok, err := dec.Token()
		if err != nil {
			return DecodeError(err)
		}
		name, _ := tok.(string)
		var change map[string]any
		if err := dec.Decode(&change); err != nil {
			return DecodeError(err)
		}
		place := "output_changes\x00" + name
		if i > 0 {
			out.raw(",")
		}
		// An output's name comes from the configuration, but a name
		// holding a secret would still show it.
		out.value(rd.scrub(place, name))
		out.raw(":")
		out.value(rd.change(place, change))
	}
	out.raw("}")
	return expectDelim(dec, '}')
}

// change redacts a change's before and after values by their sensitivity
// masks, and every other field (import IDs, generated configuration,
// replace paths) by the secrets alone.
func (rd *redactor) change(place string, c map[string]any) map[string]any {
	if c == nil {
		return nil
	}
	for _, side := range [][2]string{{"before", "before_sensitive"}, {"after", "after_sensitive"}} {
		value, sensitive := side[0], side[1]
		// An absent mask is nil, which hides any value but null.
		c[value], c[sensitive] = rd.redact(place, c[value], c[sensitive])
	}
	for k, v := range c {
		switch k {
		case "before", "after", "before_sensitive", "after_sensitive":
		default:
			c[k] = rd.scrub(place+"\x00"+k, v)
		}
	}
	return c
}

// scrub replaces what in v holds a secret, where no mask applies.
func (rd *redactor) scrub(place string, v any) any {
	out, _ := rd.redact(place, v, false)
	return out
}

// redact returns v with its sensitive parts (per mask m) and every part
// holding a secret replaced by placeholders, and the mask that marks all
// of them. Masks mirror values: true covers the subtree, false or an
// absent key covers nothing, objects and arrays descend; a value without
// any mask, or with one of another shape, is hidden whole.
func (rd *redactor) redact(place string, v, m any) (any, any) {
	if m == true {
		return rd.placeholder(place, v), true
	}
	if v == nil {
		return nil, m
	}
	if m == nil {
		return rd.placeholder(place, v), true
	}
	switch t := v.(type) {
	case string:
		if mask.Contains(t, rd.forms) {
			return rd.placeholder(place, v), true
		}
	case json.Number:
		if mask.Contains(t.String(), rd.forms) {
			return rd.placeholder(place, v), true
		}
	case map[string]any:
		return rd.redactObject(place, t, m)
	case []any:
		return rd.redactArray(place, t, m)
	}
	if m != false {
		// A scalar under an object or array mask.
		return rd.placeholder(place, v), true
	}
	return v, m
}

func (rd *redactor) redactObject(place string, v map[string]any, m any) (any, any) {
	masks, ok := m.(map[string]any)
	if !ok && m != false {
		return rd.placeholder(place, v), true
	}
	for k := range v {
		// A key cannot be replaced without colliding with another.
		if mask.Contains(k, rd.forms) {
			return rd.placeholder(place, v), true
		}
	}
	out := make(map[string]any, len(masks))
	for k, child := range masks {
		out[k] = child
	}
	for k, e := range v {
		childMask, ok := masks[k]
		if !ok {
			childMask = false
		}
		v[k], out[k] = rd.redact(place+"\x00"+k, e, childMask)
		if out[k] == false {
			delete(out, k)
		}
	}
	if m == false && len(out) == 0 {
		return v, false
	}
	return v, out
}

func (rd *redactor) redactArray(place string, v []any, m any) (any, any) {
	masks, ok := m.([]any)
	// tofu keeps unknown elements in place as null, so a longer mask
	// belongs to some other value.
	if (!ok && m != false) || len(masks) > len(v) {
		return rd.placeholder(place, v), true
	}
	out := make([]any, len(v))
	marked := false
	for i, e := range v {
		var childMask any = false
		if i < len(masks) {
			childMask = masks[i]
		}
		v[i], out[i] = rd.redact(place+"\x00"+strconv.Itoa(i), e, childMask)
		marked = marked || out[i] != false
	}
	if m == false && !marked {
		return v, false
	}
	return v, out
}

// placeholder stands in for v: a value of the same JSON type (a string for
// objects and arrays, which the renderer reads leniently), derived from an
// HMAC of v at its place, or null for null.
func (rd *redactor) placeholder(place string, v any) any {
	if v == nil {
		return nil
	}
	canonical, err := json.Marshal(v)
	if err != nil {
		canonical = nil
	}
	mac := hmac.New(sha256.New, rd.key)
	mac.Write([]byte(place))
	mac.Write([]byte{0})
	mac.Write(canonical)
	tag := mac.Sum(nil)
	switch v.(type) {
	case bool:
		return tag[0]&1 == 1
	case json.Number:
		return json.Number(strconv.FormatUint(uint64(binary.BigEndian.Uint32(tag)), 10))
	}
	return "cairn:redacted:" + hex.EncodeToString(tag[:8])
}

// providerSchema is the part of one provider's schema the renderer reads.
type providerSchema struct {
	Provider          json.RawMessage            `json:"provider,omitempty"`
	ResourceSchemas   map[string]json.RawMessage `json:"resource_schemas,omitempty"`
	DataSourceSchemas map[string]json.RawMessage `json:"data_source_schemas,omitempty"`
}

// schemaSections copies the provider schemas' format version and the
// schemas of the types the plan's changes named. Schemas describe
// providers, not values: they are copied as they are.
func (rd *redactor) schemaSections(ctx context.Context, dec *json.Decoder, out *jsonWriter, field func(string)) error {
	schemasSeen := false
	err := eachMember(ctx, dec, func(key string) error {
		switch key {
		case "format_version":
			var version string
			if err := dec.Decode(&version); err != nil {
				return DecodeError(err)
			}
			field("provider_format_version")
			out.value(version)
			return nil
		case "provider_schemas":
			if schemasSeen {
				return fmt.Errorf("%w: provider_schemas given twice", ErrMalformed)
			}
			schemasSeen = true
			field(key)
			return rd.providerSchemas(ctx, dec, out)
		}
		return skipValue(ctx, dec)
	})
	if err != nil {
		return err
	}
	if !schemasSeen {
		field("provider_schemas")
		out.raw("{}")
	}
	return nil
}

func (rd *redactor) providerSchemas(ctx context.Context, dec *json.Decoder, out *jsonWriter) error {
	if empty, err := openObject(dec, out, "provider_schemas"); empty || err != nil {
		return err
	}
	written := 0
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return DecodeError(err)
		}
		name, _ := tok.(string)
		used := rd.used[name]
		if used == nil {
			if err := skipValue(ctx, dec); err != nil {
				return err
			}
			continue
		}
		var schema providerSchema
		if err := dec.Decode(&schema); err != nil {
			return DecodeError(err)
		}
		schema.ResourceSchemas = only(schema.ResourceSchemas, used.resources)
		schema.DataSourceSchemas = only(schema.DataSourceSchemas, used.dataSources)
		if written > 0 {
			out.raw(",")
		}
		written++
		out.value(name)
		out.raw(":")
		out.value(schema)
	}
	out.raw("}")
	return expectDelim(dec, '}')
}

// only keeps the schemas of the types named.
func only(schemas map[string]json.RawMessage, types map[string]bool) map[string]json.RawMessage {
	kept := map[string]json.RawMessage{}
	for typ := range types {
		if s, ok := schemas[typ]; ok {
			kept[typ] = s
		}
	}
	return kept
}

// openObject reads the start of an object section and writes its own; a
// null section is written as an empty object, and there is nothing more to
// copy.
func openObject(dec *json.Decoder, out *jsonWriter, section string) (empty bool, err error) {
	tok, err := dec.Token()
	if err != nil {
		return false, DecodeError(err)
	}
	if tok == nil {
		out.raw("{}")
		return true, nil
	}
	if tok != json.Delim('{') {
		return false, fmt.Errorf("%w: %s is not an object", ErrMalformed, section)
	}
	out.raw("{")
	return false, nil
}

// jsonWriter writes JSON text, keeping the first error for flush.
type jsonWriter struct {
	w   *bufio.Writer
	err error
}

func (j *jsonWriter) raw(s string) {
	if j.err == nil {
		_, j.err = j.w.WriteString(s)
	}
}

func (j *jsonWriter) value(v any) {
	if j.err != nil {
		return
	}
	body, err := json.Marshal(v)
	if err != nil {
		j.err = fmt.Errorf("encoding the redacted plan: %w", err)
		return
	}
	_, j.err = j.w.Write(body)
}

func (j *jsonWriter) flush() error {
	if j.err != nil {
		return j.err
	}
	return j.w.Flush()
}
