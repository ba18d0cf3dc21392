package plandiff

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/cairnhq/cairn/api/planjson"
)

// Schema identifies the artifact's shape; consumers refuse other values.
const Schema = "cairn.plan-diff/v1"

// Bounds of one artifact (SPEC §8). MaxBytes is measured on json.Marshal's
// output of the whole artifact.
const (
	MaxResources = 5000
	MaxBytes     = 4 << 20
)

// Resource actions as the artifact names them.
const (
	ActionCreate  = "create"
	ActionUpdate  = "update"
	ActionDelete  = "delete"
	ActionReplace = "replace"
)

// Whether a resource's before/after values are shown, and why not.
const (
	DetailShown    = "shown"
	DetailWithheld = "withheld"

	WithheldSensitivityUnresolved = "sensitivity_unresolved"
	WithheldSize                  = "size"
)

// Counts are the plan's totals as tofu prints them ("Plan: 1 to add, ..."),
// so a replace counts once in Add and once in Destroy.
type Counts struct {
	Add     int `json:"add"`
	Change  int `json:"change"`
	Destroy int `json:"destroy"`
}

// Resource is one resource instance's planned change.
type Resource struct {
	Address       string `json:"address"`
	ModuleAddress string `json:"module_address,omitempty"`
	Type          string `json:"type"`
	Name          string `json:"name"`
	Provider      string `json:"provider"`
	// Action is ActionCreate, ActionUpdate, ActionDelete or ActionReplace.
	Action string `json:"action"`
	// Actions are tofu's own, so a reviewer can tell delete-then-create
	// from create-before-destroy.
	Actions []string `json:"actions"`
	// Before and After are the values with sensitive parts replaced by
	// {"cairn:redacted":"sensitive"} and unknown parts by
	// {"cairn:unknown":true}; both are null when Detail is DetailWithheld.
	Before         json.RawMessage `json:"before"`
	After          json.RawMessage `json:"after"`
	Detail         string          `json:"detail"`
	WithheldReason string          `json:"withheld_reason,omitempty"`
}

// Artifact is the cairn.plan-diff/v1 document; json.Marshal gives its wire
// form (contracts/plan-diff-v1.schema.json).
type Artifact struct {
	Schema    string     `json:"schema"`
	Resources []Resource `json:"resources"`
	// Counts and TotalResources cover every change in the plan, also those
	// cut by the bounds, so the summary stays true when the list is not.
	Counts         Counts `json:"counts"`
	TotalResources int    `json:"total_resources"`
	Truncated      bool   `json:"truncated"`
}

// planChange is the part of one resource_changes element the artifact
// needs. Everything else in the plan (variables, planned_values,
// prior_state, configuration, ...) is never decoded into memory.
type planChange struct {
	Address       string `json:"address"`
	ModuleAddress string `json:"module_address"`
	Type          string `json:"type"`
	Name          string `json:"name"`
	ProviderName  string `json:"provider_name"`
	Change        struct {
		Actions         []string        `json:"actions"`
		Before          json.RawMessage `json:"before"`
		After           json.RawMessage `json:"after"`
		AfterUnknown    json.RawMessage `json:"after_unknown"`
		BeforeSensitive json.RawMessage `json:"before_sensitive"`
		AfterSensitive  json.RawMessage `json:"after_sensitive"`
	} `json:"change"`
}

// countedChange is decoded for changes past MaxResources: they are counted
// but, being cut before redaction, their values are not even copied.
type countedChange struct {
	Address string `json:"address"`
	Change  struct {
		Actions []string `json:"actions"`
	} `json:"change"`
}

// Build reads plan JSON (`tofu show -json`, format 1.x) from r and returns
// the artifact. Malformed input gives an error wrapping ErrMalformedPlan.
// The caller bounds r; Build holds one resource change at a time plus the
// artifact being built.
func Build(ctx context.Context, r io.Reader) (Artifact, error) {
	a := Artifact{Schema: Schema, Resources: []Resource{}}
	dec := json.NewDecoder(r)
	if err := planjson.EachChange(ctx, dec, func(i int) error { return readChange(dec, i, &a) }); err != nil {
		return Artifact{}, err
	}
	if err := fitSize(&a); err != nil {
		return Artifact{}, err
	}
	return a, nil
}

// readChange adds one resource change. Past MaxResources only its action is
// decoded, for the counts: the excess is cut before redaction.
func readChange(dec *json.Decoder, i int, a *Artifact) error {
	if len(a.Resources) >= MaxResources {
		var c countedChange
		if err := dec.Decode(&c); err != nil {
			return planjson.DecodeError(err)
		}
		action, err := classify(i, c.Address, c.Change.Actions)
		if err != nil {
			return err
		}
		if action != "" {
			a.count(action)
			a.Truncated = true
		}
		return nil
	}
	var c planChange
	if err := dec.Decode(&c); err != nil {
		return planjson.DecodeError(err)
	}
	action, err := classify(i, c.Address, c.Change.Actions)
	if err != nil || action == "" {
		return err
	}
	a.count(action)
	a.Resources = append(a.Resources, redactChange(c, action))
	return nil
}

// classify maps tofu's action tuple to the artifact's action, or "" for a
// change the artifact leaves out (no-op, read).
func classify(i int, address string, actions []string) (string, error) {
	if address == "" {
		return "", fmt.Errorf("%w: resource change %d has no address", ErrMalformedPlan, i)
	}
	if len(actions) == 0 {
		return "", fmt.Errorf("%w: resource change %s has no actions", ErrMalformedPlan, address)
	}
	switch strings.Join(actions, ",") {
	case "no-op", "read":
		return "", nil
	case "create":
		return ActionCreate, nil
	case "update":
		return ActionUpdate, nil
	case "delete":
		return ActionDelete, nil
	case "delete,create", "create,delete":
		return ActionReplace, nil
	}
	return "", fmt.Errorf("resource %s: %w %q", address, ErrUnsupportedAction, actions)
}

func (a *Artifact) count(action string) {
	a.TotalResources++
	switch action {
	case ActionCreate:
		a.Counts.Add++
	case ActionUpdate:
		a.Counts.Change++
	case ActionDelete:
		a.Counts.Destroy++
	case ActionReplace:
		a.Counts.Add++
		a.Counts.Destroy++
	}
}

func redactChange(c planChange, action string) Resource {
	res := Resource{
		Address:       c.Address,
		ModuleAddress: c.ModuleAddress,
		Type:          c.Type,
		Name:          c.Name,
		Provider:      c.ProviderName,
		Action:        action,
		Actions:       c.Change.Actions,
		Detail:        DetailShown,
	}
	// Prior values are known by definition, so before has no unknown mask.
	before, errBefore := redact(c.Change.Before, c.Change.BeforeSensitive, json.RawMessage("false"))
	after, errAfter := redact(c.Change.After, c.Change.AfterSensitive, c.Change.AfterUnknown)
	if errBefore != nil || errAfter != nil {
		withhold(&res, WithheldSensitivityUnresolved)
		return res
	}
	res.Before, res.After = before, after
	return res
}

func withhold(res *Resource, reason string) {
	res.Before = json.RawMessage("null")
	res.After = json.RawMessage("null")
	res.Detail = DetailWithheld
	res.WithheldReason = reason
}

// fitSize enforces MaxBytes: first the largest details are withheld, one
// at a time, since a list of every change without values still serves a
// review; trailing resources go only when that is not enough.
func fitSize(a *Artifact) error {
	base := *a
	base.Resources = []Resource{}
	total, err := encodedSize(base)
	if err != nil {
		return err
	}
	sizes := make([]int, len(a.Resources))
	for i, res := range a.Resources {
		if sizes[i], err = encodedSize(res); err != nil {
			return err
		}
		total += sizes[i]
	}
	if len(a.Resources) > 1 {
		total += len(a.Resources) - 1 // commas between array elements
	}
	if total <= MaxBytes {
		return nil
	}
	if !a.Truncated {
		a.Truncated = true
		total-- // "true" is one byte shorter than "false"
	}

	largest := make([]int, 0, len(a.Resources))
	for i, res := range a.Resources {
		if res.Detail == DetailShown {
			largest = append(largest, i)
		}
	}
	detailSize := func(i int) int { return len(a.Resources[i].Before) + len(a.Resources[i].After) }
	// Stable on plan order, so equal sizes are withheld first-come and the
	// result is deterministic.
	slices.SortStableFunc(largest, func(x, y int) int { return detailSize(y) - detailSize(x) })
	for _, i := range largest {
		if total <= MaxBytes {
			return nil
		}
		withhold(&a.Resources[i], WithheldSize)
		size, err := encodedSize(a.Resources[i])
		if err != nil {
			return err
		}
		total += size - sizes[i]
		sizes[i] = size
	}
	for n := len(a.Resources); total > MaxBytes && n > 0; n-- {
		total -= sizes[n-1]
		if n > 1 {
			total-- // its comma
		}
		a.Resources = a.Resources[:n-1]
	}
	return nil
}

// encodedSize is len(json.Marshal(v)) without keeping the bytes.
func encodedSize(v any) (int, error) {
	var w byteCounter
	if err := json.NewEncoder(&w).Encode(v); err != nil {
		return 0, fmt.Errorf("measuring plan diff: %w", err)
	}
	return int(w) - 1, nil // Encode ends with a newline Marshal does not add
}

type byteCounter int

func (c *byteCounter) Write(p []byte) (int, error) {
	*c += byteCounter(len(p))
	return len(p), nil
}

var (
	redactedMarker = []byte(`{"cairn:redacted":"sensitive"}`)
	unknownMarker  = []byte(`{"cairn:unknown":true}`)

	// errUnresolved means a mask does not fit its value; the resource's
	// detail is then withheld, never redacted by guesswork.
	errUnresolved = errors.New("sensitivity mask does not fit its value")
)

// redact returns value with sensitive parts (per the sensitive mask) and
// unknown parts (per the unknown mask) replaced by markers. Masks mirror
// the value's shape: true covers the whole subtree, false or an absent
// key covers nothing, objects and arrays descend.
func redact(value, sensitiveMask, unknownMask json.RawMessage) (json.RawMessage, error) {
	sensitive, err := decodeMask(sensitiveMask)
	if err != nil {
		return nil, err
	}
	unknown, err := decodeMask(unknownMask)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(value)) == 0 {
		value = json.RawMessage("null")
	}
	var buf bytes.Buffer
	buf.Grow(len(value))
	if err := appendRedacted(&buf, value, sensitive, unknown); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeMask gives nil for an absent or null mask, which fits only a null
// value.
func decodeMask(raw json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	var m any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, errUnresolved
	}
	return m, nil
}

func appendRedacted(buf *bytes.Buffer, value json.RawMessage, sensitive, unknown any) error {
	if !isMask(sensitive) || !isMask(unknown) {
		return errUnresolved
	}
	// Sensitive is checked first so a value both sensitive and unknown is
	// shown as sensitive.
	if sensitive == true {
		buf.Write(redactedMarker)
		return nil
	}
	if unknown == true {
		writeUnknown(buf, sensitive)
		return nil
	}
	value = bytes.TrimSpace(value)
	if bytes.Equal(value, []byte("null")) {
		buf.WriteString("null")
		return nil
	}
	// A value without a mask cannot be told safe.
	if sensitive == nil || unknown == nil {
		return errUnresolved
	}
	if sensitive == false && unknown == false {
		return json.Compact(buf, value)
	}
	switch value[0] {
	case '{':
		return appendObject(buf, value, sensitive, unknown)
	case '[':
		return appendArray(buf, value, sensitive, unknown)
	}
	// A scalar under an object or array mask.
	return errUnresolved
}

// writeUnknown marks a value not known until apply; if its mask says some
// part of it will be sensitive, it is marked sensitive instead.
func writeUnknown(buf *bytes.Buffer, sensitive any) {
	if hasTrue(sensitive) {
		buf.Write(redactedMarker)
		return
	}
	buf.Write(unknownMarker)
}

func appendObject(buf *bytes.Buffer, value json.RawMessage, sensitive, unknown any) error {
	sensitiveAt, ok := objectMask(sensitive)
	if !ok {
		return errUnresolved
	}
	unknownAt, ok := objectMask(unknown)
	if !ok {
		return errUnresolved
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(value, &fields); err != nil {
		return errUnresolved
	}
	// tofu leaves unknown attributes out of "after"; they exist only in
	// the unknown mask.
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	for k, m := range unknownAt {
		if _, ok := fields[k]; !ok && m == true {
			keys = append(keys, k)
		}
	}
	// Sorted keys make the output deterministic; tofu sorts them too.
	slices.Sort(keys)
	buf.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		name, err := json.Marshal(k)
		if err != nil {
			return err
		}
		buf.Write(name)
		buf.WriteByte(':')
		field, ok := fields[k]
		if !ok {
			writeUnknown(buf, maskAt(sensitiveAt, k))
			continue
		}
		if err := appendRedacted(buf, field, maskAt(sensitiveAt, k), maskAt(unknownAt, k)); err != nil {
			return err
		}
	}
	buf.WriteByte('}')
	return nil
}

func appendArray(buf *bytes.Buffer, value json.RawMessage, sensitive, unknown any) error {
	sensitiveAt, ok := arrayMask(sensitive)
	if !ok {
		return errUnresolved
	}
	unknownAt, ok := arrayMask(unknown)
	if !ok {
		return errUnresolved
	}
	var items []json.RawMessage
	if err := json.Unmarshal(value, &items); err != nil {
		return errUnresolved
	}
	// tofu keeps unknown elements in place as null, so a longer mask
	// belongs to some other value.
	if len(sensitiveAt) > len(items) || len(unknownAt) > len(items) {
		return errUnresolved
	}
	buf.WriteByte('[')
	for i, item := range items {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := appendRedacted(buf, item, elementAt(sensitiveAt, i), elementAt(unknownAt, i)); err != nil {
			return err
		}
	}
	buf.WriteByte(']')
	return nil
}

// isMask reports whether m is a mask at all: a bool, an object, an array,
// or nil (absent).
func isMask(m any) bool {
	switch m.(type) {
	case nil, bool, map[string]any, []any:
		return true
	}
	return false
}

func objectMask(m any) (map[string]any, bool) {
	switch m := m.(type) {
	case bool:
		return nil, !m
	case map[string]any:
		return m, true
	}
	return nil, false
}

func arrayMask(m any) ([]any, bool) {
	switch m := m.(type) {
	case bool:
		return nil, !m
	case []any:
		return m, true
	}
	return nil, false
}

// maskAt and elementAt treat a missing entry as false: tofu omits what is
// neither sensitive nor unknown.
func maskAt(m map[string]any, key string) any {
	if v, ok := m[key]; ok {
		return v
	}
	return false
}

func elementAt(m []any, i int) any {
	if i < len(m) {
		return m[i]
	}
	return false
}

func hasTrue(m any) bool {
	switch m := m.(type) {
	case bool:
		return m
	case map[string]any:
		for _, v := range m {
			if hasTrue(v) {
				return true
			}
		}
	case []any:
		for _, v := range m {
			if hasTrue(v) {
				return true
			}
		}
	}
	return false
}
