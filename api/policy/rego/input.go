package rego

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cairnhq/cairn/api/policy/rego/internal/jsonscan"
)

// Input bounds (SPEC §8). Each is checked on its own, so no single
// dimension can be traded against another. A node is any JSON value:
// object, array, string, number, boolean or null; object keys are not
// nodes. MaxSensitivityMapNodes counts the nodes of every before_sensitive
// and after_sensitive mask, booleans included. Counting scalars means the
// 50,000-node bound, not MaxResourceChanges, is what limits most plans:
// every change carries at least ten values (the change object, address,
// type, provider, the change's object, the actions array and its item,
// before, after and both masks), so 5,000 changes cannot fit, and a
// typical resource with a few attributes admits some 2,000 to 3,000.
const (
	MaxInputBytes           = 2 << 20
	MaxInputNodes           = 50_000
	MaxResourceChanges      = 5000
	MaxSensitivityMapNodes  = 20_000
	MaxInputDepth           = 64
	MaxInputObjectKeys      = 10_000
	MaxInputArrayItems      = 10_000
	MaxInputStringBytes     = 65_536
	minSecretCanaryBytes    = 4
	commitSHALength         = 40
	manualRepositoryPrefix  = "cfg_"
	workspaceIDPrefix       = "ws_"
	runIDPrefix             = "run_"
	deposedAddressSeparator = " (deposed object "
)

// Run kinds.
const (
	KindManual      = "manual"
	KindTracked     = "tracked"
	KindSpeculative = "speculative"
)

// validActions are the action tuples OpenTofu writes in a plan.
var validActions = []string{"no-op", "create", "read", "update", "delete", "delete,create", "create,delete", "forget"}

func invalidInput(format string, args ...any) error {
	return evalErr(CodeInputInvalid, fmt.Sprintf(format, args...))
}

func inputTooLarge(format string, args ...any) error {
	return evalErr(CodeInputTooLarge, fmt.Sprintf(format, args...))
}

// CheckInput validates a cairn.policy.input/v1 document and returns it
// decoded. The bounds are checked on the raw bytes before anything is
// built; then the schema: exactly the five top-level fields, run kind and
// commit rules, unique addresses, valid action tuples, boolean sensitivity
// masks, and no value left where its mask says sensitive. BuildInput runs
// it on what it produced; the engine's ParseInput converts what it returns
// for OPA. Failures are *EvalError with CodeInputInvalid or
// CodeInputTooLarge.
func CheckInput(doc []byte) (map[string]any, error) {
	if len(doc) > MaxInputBytes {
		return nil, inputTooLarge("input is %d bytes, over %d", len(doc), MaxInputBytes)
	}
	// encoding/json would quietly replace invalid UTF-8, so the document
	// checked would not be the document hashed.
	if !utf8.Valid(doc) {
		return nil, invalidInput("input is not valid UTF-8")
	}
	if err := checkBounds(doc); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, invalidInput("input is not a JSON object: %v", err)
	}
	if err := checkSchema(m); err != nil {
		return nil, err
	}
	return m, nil
}

// frame is one open object or array during the bounds walk.
type frame struct {
	object  bool
	wantKey bool
	n       int
	keys    map[string]struct{}
}

// checkBounds walks doc's bytes without building anything and enforces the
// size bounds. It also refuses duplicate object keys, which decoders
// resolve differently, so the document checked could differ from the
// document a policy sees. The walk trusts doc's structure only after
// json.Valid: it is a byte scanner, several times faster than
// json.Decoder.Token, which decodes each scalar on its own.
func checkBounds(doc []byte) error {
	if !json.Valid(doc) {
		return invalidInput("input is not a single valid JSON value")
	}
	var stack []frame
	nodes := 0
	// value counts a value (not a key) as a node, and as an item of the
	// container it sits in.
	value := func() error {
		if nodes++; nodes > MaxInputNodes {
			return inputTooLarge("input has more than %d nodes", MaxInputNodes)
		}
		if len(stack) == 0 {
			return nil
		}
		top := &stack[len(stack)-1]
		if top.object {
			top.wantKey = true
			return nil
		}
		if top.n++; top.n > MaxInputArrayItems {
			return inputTooLarge("an array has more than %d items", MaxInputArrayItems)
		}
		return nil
	}
	for i := 0; i < len(doc); i++ {
		switch c := doc[i]; c {
		case ' ', '\t', '\n', '\r', ',', ':':
		case '{', '[':
			if err := value(); err != nil {
				return err
			}
			if len(stack) >= MaxInputDepth {
				return inputTooLarge("input is nested deeper than %d", MaxInputDepth)
			}
			stack = append(stack, frame{object: c == '{', wantKey: c == '{'})
		case '}', ']':
			stack = stack[:len(stack)-1]
		case '"':
			end := jsonscan.StringEnd(doc, i)
			quoted := doc[i : end+1]
			i = end
			isKey := len(stack) > 0 && stack[len(stack)-1].wantKey
			s, err := stringAt(quoted, isKey)
			if err != nil {
				return err
			}
			if isKey {
				top := &stack[len(stack)-1]
				if top.keys == nil {
					top.keys = map[string]struct{}{}
				}
				if _, dup := top.keys[s]; dup {
					return invalidInput("an object repeats a key")
				}
				top.keys[s] = struct{}{}
				if top.n++; top.n > MaxInputObjectKeys {
					return inputTooLarge("an object has more than %d keys", MaxInputObjectKeys)
				}
				top.wantKey = false
				continue
			}
			if err := value(); err != nil {
				return err
			}
		default: // a number, true, false or null
			for i+1 < len(doc) && !strings.ContainsRune(" \t\n\r,]}", rune(doc[i+1])) {
				i++
			}
			if err := value(); err != nil {
				return err
			}
		}
	}
	return nil
}

// stringAt checks the length of a quoted JSON string and, for a key,
// decodes it. Escapes only shorten a string, so the quoted form bounds the
// decoded one and most strings need no decoding to be checked.
func stringAt(quoted []byte, decode bool) (string, error) {
	raw := quoted[1 : len(quoted)-1]
	escaped := bytes.IndexByte(raw, '\\') >= 0
	if !escaped && len(raw) > MaxInputStringBytes {
		return "", inputTooLarge("a string is over %d bytes", MaxInputStringBytes)
	}
	if !escaped && !decode {
		return "", nil
	}
	if !escaped {
		return string(raw), nil
	}
	var s string
	if err := json.Unmarshal(quoted, &s); err != nil {
		return "", invalidInput("input has a bad string: %v", err)
	}
	if len(s) > MaxInputStringBytes {
		return "", inputTooLarge("a string is over %d bytes", MaxInputStringBytes)
	}
	return s, nil
}

// fields checks that obj has exactly the required keys plus any of the
// optional ones.
func fields(obj map[string]any, where string, required []string, optional ...string) error {
	for _, k := range required {
		if _, ok := obj[k]; !ok {
			return invalidInput("%s: missing %s", where, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if !slices.Contains(required, k) && !slices.Contains(optional, k) {
			return invalidInput("%s: unknown field %q", where, limitText(k, 64))
		}
	}
	return nil
}

func object(v any, where string) (map[string]any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, invalidInput("%s is not an object", where)
	}
	return m, nil
}

func str(v any, where string) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", invalidInput("%s is not a string", where)
	}
	return s, nil
}

func checkSchema(doc map[string]any) error {
	if err := fields(doc, "input", []string{"version", "run", "source", "workspace", "resource_changes"}); err != nil {
		return err
	}
	if doc["version"] != InputSchema {
		return invalidInput("version is not %s", InputSchema)
	}
	kind, err := checkRun(doc["run"])
	if err != nil {
		return err
	}
	if err := checkSource(doc["source"], kind); err != nil {
		return err
	}
	if err := checkWorkspace(doc["workspace"]); err != nil {
		return err
	}
	return checkResourceChanges(doc["resource_changes"])
}

func checkRun(v any) (string, error) {
	run, err := object(v, "run")
	if err != nil {
		return "", err
	}
	if err := fields(run, "run", []string{"kind"}, "id"); err != nil {
		return "", err
	}
	kind, _ := run["kind"].(string)
	if kind != KindManual && kind != KindTracked && kind != KindSpeculative {
		return "", invalidInput("run.kind is not manual, tracked or speculative")
	}
	if id, ok := run["id"]; ok {
		s, err := str(id, "run.id")
		if err != nil {
			return "", err
		}
		if len(s) <= len(runIDPrefix) || !strings.HasPrefix(s, runIDPrefix) {
			return "", invalidInput("run.id is not a run ID")
		}
	}
	return kind, nil
}

func checkSource(v any, kind string) error {
	src, err := object(v, "source")
	if err != nil {
		return err
	}
	if err := fields(src, "source", []string{"commit_sha", "repository_id", "working_directory"}); err != nil {
		return err
	}
	repo, err := str(src["repository_id"], "source.repository_id")
	if err != nil {
		return err
	}
	if _, err := str(src["working_directory"], "source.working_directory"); err != nil {
		return err
	}
	commit := src["commit_sha"]
	if commit != nil {
		s, ok := commit.(string)
		if !ok || !isCommitSHA(s) {
			return invalidInput("source.commit_sha is not 40 lowercase hex digits")
		}
	}
	// A manual run uploads a configuration version: it has no commit, and
	// one claiming a commit would let a policy trust a fabricated one.
	switch {
	case kind == KindManual && commit != nil:
		return invalidInput("a manual run has no commit")
	case kind != KindManual && commit == nil:
		return invalidInput("a %s run needs its commit", kind)
	case kind == KindManual && (len(repo) <= len(manualRepositoryPrefix) || !strings.HasPrefix(repo, manualRepositoryPrefix)):
		return invalidInput("a manual run's repository_id is its configuration version ID")
	case repo == "":
		return invalidInput("source.repository_id is empty")
	}
	return nil
}

func isCommitSHA(s string) bool {
	if len(s) != commitSHALength {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func checkWorkspace(v any) error {
	ws, err := object(v, "workspace")
	if err != nil {
		return err
	}
	if err := fields(ws, "workspace", []string{"id", "metadata"}); err != nil {
		return err
	}
	id, err := str(ws["id"], "workspace.id")
	if err != nil {
		return err
	}
	if len(id) <= len(workspaceIDPrefix) || !strings.HasPrefix(id, workspaceIDPrefix) {
		return invalidInput("workspace.id is not a workspace ID")
	}
	_, err = object(ws["metadata"], "workspace.metadata")
	return err
}

func checkResourceChanges(v any) error {
	changes, ok := v.([]any)
	if !ok {
		return invalidInput("resource_changes is not an array")
	}
	if len(changes) > MaxResourceChanges {
		return inputTooLarge("%d resource changes, over %d", len(changes), MaxResourceChanges)
	}
	addresses := make(map[string]bool, len(changes))
	maskNodes := 0
	for i, c := range changes {
		where := fmt.Sprintf("resource_changes[%d]", i)
		rc, err := object(c, where)
		if err != nil {
			return err
		}
		if err := fields(rc, where, []string{"address", "type", "provider_name", "change"}); err != nil {
			return err
		}
		address, err := str(rc["address"], where+".address")
		if err != nil {
			return err
		}
		if address == "" {
			return invalidInput("%s.address is empty", where)
		}
		if addresses[address] {
			return invalidInput("%s.address repeats an earlier address", where)
		}
		addresses[address] = true
		if _, err := str(rc["type"], where+".type"); err != nil {
			return err
		}
		if _, err := str(rc["provider_name"], where+".provider_name"); err != nil {
			return err
		}
		where += ".change"
		change, err := object(rc["change"], where)
		if err != nil {
			return err
		}
		if err := fields(change, where, []string{"actions", "before", "after", "before_sensitive", "after_sensitive"}); err != nil {
			return err
		}
		if !validActionTuple(change["actions"]) {
			return invalidInput("%s.actions is not a valid action tuple", where)
		}
		for _, side := range []string{"before", "after"} {
			mask := change[side+"_sensitive"]
			n, ok := maskSize(mask)
			if !ok {
				return invalidInput("%s.%s_sensitive is not a sensitivity mask", where, side)
			}
			if maskNodes += n; maskNodes > MaxSensitivityMapNodes {
				return inputTooLarge("sensitivity masks have more than %d nodes", MaxSensitivityMapNodes)
			}
			// redact changes the document only where it rejects it.
			if _, exposed, fits := redact(change[side], mask); exposed || !fits {
				return invalidInput("%s.%s is not redacted by its mask", where, side)
			}
		}
	}
	return nil
}

func validActionTuple(v any) bool {
	items, ok := v.([]any)
	if !ok || len(items) == 0 || len(items) > 2 {
		return false
	}
	parts := make([]string, len(items))
	for i, it := range items {
		s, ok := it.(string)
		if !ok {
			return false
		}
		parts[i] = s
	}
	return slices.Contains(validActions, strings.Join(parts, ","))
}

// maskSize reports whether m is a sensitivity mask (null, a boolean, or
// objects and arrays of masks) and how many nodes it has.
func maskSize(m any) (int, bool) {
	switch x := m.(type) {
	case nil, bool:
		return 1, true
	case map[string]any:
		n := 1
		for _, v := range x {
			c, ok := maskSize(v)
			if !ok {
				return 0, false
			}
			n += c
		}
		return n, true
	case []any:
		n := 1
		for _, v := range x {
			c, ok := maskSize(v)
			if !ok {
				return 0, false
			}
			n += c
		}
		return n, true
	}
	return 0, false
}

// redact replaces, in place, every part of v that mask marks sensitive
// with nil. It reports whether it replaced anything that was not already
// null, and whether the mask fits v. Masks mirror the value: true covers
// the whole subtree, false covers nothing, an object mask descends into an
// object (a key it does not name is not sensitive) and an array mask into
// an array of the same length. No mask at all, or one of another shape
// than its value, does not fit: the value cannot be told safe.
func redact(v, mask any) (out any, exposed, fits bool) {
	if v == nil {
		return nil, false, true
	}
	switch m := mask.(type) {
	case bool:
		if m {
			return nil, true, true
		}
		return v, false, true
	case map[string]any:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, true, false
		}
		exposed, fits = false, true
		for k, sub := range m {
			field, present := obj[k]
			if !present {
				continue // tofu masks attributes it leaves out (unknowns)
			}
			var e, f bool
			obj[k], e, f = redact(field, sub)
			exposed, fits = exposed || e, fits && f
		}
		return obj, exposed, fits
	case []any:
		arr, ok := v.([]any)
		if !ok || len(arr) != len(m) {
			return nil, true, false
		}
		exposed, fits = false, true
		for i := range arr {
			var e, f bool
			arr[i], e, f = redact(arr[i], m[i])
			exposed, fits = exposed || e, fits && f
		}
		return arr, exposed, fits
	}
	return nil, true, false
}

// redactValue is v with its sensitive parts null, or null whole if its
// mask does not fit it anywhere: a mask that is wrong in one place may be
// wrong in the places that look right.
func redactValue(v, mask any) any {
	out, _, fits := redact(v, mask)
	if !fits {
		return nil
	}
	return out
}

// CheckSecrets fails closed if any secret the run knows (variable values,
// credentials) appears in the input document, raw or as encoding/json
// would escape it. Masks alone are not enough: a provider can copy a
// sensitive value into an attribute its schema does not mark sensitive.
// Secrets shorter than 4 bytes are skipped; they would match ordinary
// text. The error names the secret's index, never its value.
func CheckSecrets(doc []byte, secrets [][]byte) error {
	for i, s := range secrets {
		if len(s) < minSecretCanaryBytes {
			continue
		}
		if bytes.Contains(doc, s) {
			return evalErr(CodeInputSecretDetected, fmt.Sprintf("secret %d appears in the input", i))
		}
		for _, escapeHTML := range []bool{true, false} {
			if enc := jsonStringBody(s, escapeHTML); !bytes.Equal(enc, s) && bytes.Contains(doc, enc) {
				return evalErr(CodeInputSecretDetected, fmt.Sprintf("secret %d appears JSON-escaped in the input", i))
			}
		}
	}
	return nil
}

// jsonStringBody is s encoded as a JSON string, without the quotes.
func jsonStringBody(s []byte, escapeHTML bool) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(escapeHTML)
	_ = enc.Encode(string(s)) // a string always encodes
	out := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	return out[1 : len(out)-1]
}
