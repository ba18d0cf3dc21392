package plandiff

import (
	"bytes"
	"encoding/json"

	"github.com/cairnhq/cairn/api/platform/mask"
)

// RedactSecrets redacts every value (string, number, or object by one of
// its keys) that contains one of secrets in any of its spellings (escaped,
// base64, URL-encoded; see package mask), however short.
// Masks are not always enough: a provider can copy a sensitive input into
// an attribute its schema does not mark sensitive (terraform_data's output
// does), and the plan then carries the value unmasked. The runner knows the
// sensitive values it fed the plan, so it removes them wherever they ended
// up. It reports whether anything was redacted.
func (a *Artifact) RedactSecrets(secrets []string) bool {
	live := mask.Forms(secrets)
	if len(live) == 0 {
		return false
	}
	changed := false
	for i := range a.Resources {
		for _, v := range []*json.RawMessage{&a.Resources[i].Before, &a.Resources[i].After} {
			if len(*v) == 0 || !mask.Contains(string(*v), live) {
				continue
			}
			// Numbers stay literal, so a secret written as one is seen.
			dec := json.NewDecoder(bytes.NewReader(*v))
			dec.UseNumber()
			var decoded any
			if err := dec.Decode(&decoded); err != nil {
				// Undecodable detail that mentions a secret is withheld whole.
				withhold(&a.Resources[i], WithheldSensitivityUnresolved)
				changed = true
				break
			}
			out, err := json.Marshal(scrub(decoded, live))
			if err != nil {
				withhold(&a.Resources[i], WithheldSensitivityUnresolved)
				changed = true
				break
			}
			*v, changed = out, true
		}
	}
	return changed
}

// scrub replaces every string and number holding a secret with the
// redaction marker, and every object with such a key whole, since a key
// cannot be replaced without colliding with another.
func scrub(v any, secrets []string) any {
	redacted := map[string]any{"cairn:redacted": "sensitive"}
	switch t := v.(type) {
	case string:
		if mask.Contains(t, secrets) {
			return redacted
		}
	case json.Number:
		if mask.Contains(string(t), secrets) {
			return redacted
		}
	case map[string]any:
		for k := range t {
			if mask.Contains(k, secrets) {
				return redacted
			}
		}
		for k, e := range t {
			t[k] = scrub(e, secrets)
		}
	case []any:
		for i, e := range t {
			t[i] = scrub(e, secrets)
		}
	}
	return v
}
