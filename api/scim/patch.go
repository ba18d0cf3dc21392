package scim

import (
	"fmt"
	"strings"

	"github.com/elimity-com/scim"
	"github.com/scim2/filter-parser/v2"
)

// applyPatch applies PATCH operations (RFC 7644 §3.5.2) to a resource's
// attributes in place. It speaks both dialects the provisioning clients
// send: Okta's path-less replace with a value object and members[value eq
// "…"] removals, and Entra ID's capitalised ops (the handler lower-cases
// them), emails[type eq "work"].value paths, single-valued attributes sent
// as add, and member removal by a value array. A filtered path that
// matches nothing gains the element its eq terms describe, which is what
// Entra ID expects for a work address the user did not have yet.
func applyPatch(res map[string]any, ops []scim.PatchOperation) error {
	for _, op := range ops {
		var err error
		switch strings.ToLower(op.Op) {
		case scim.PatchOperationAdd:
			err = patchSet(res, op.Path, op.Value, false)
		case scim.PatchOperationReplace:
			err = patchSet(res, op.Path, op.Value, true)
		case scim.PatchOperationRemove:
			err = patchRemove(res, op.Path, op.Value)
		default:
			err = fmt.Errorf("%w: op %q", ErrInvalidValue, op.Op)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// container is the map an attribute path names its attribute in: the
// resource, or the extension object a URI prefix names.
func container(res map[string]any, p filter.AttributePath, create bool) map[string]any {
	if p.URIPrefix == nil || *p.URIPrefix == "" {
		return res
	}
	k := keyOf(res, *p.URIPrefix)
	ext, ok := res[k].(map[string]any)
	if !ok && create {
		ext = map[string]any{}
		res[k] = ext
	}
	return ext
}

func patchSet(res map[string]any, path *filter.Path, value any, replace bool) error {
	if path == nil {
		obj, ok := value.(map[string]any)
		if !ok {
			return fmt.Errorf("%w: a patch without a path takes an object", ErrInvalidValue)
		}
		for k, v := range obj {
			setAttribute(res, k, v, replace)
		}
		return nil
	}
	m := container(res, path.AttributePath, true)
	k := keyOf(m, path.AttributePath.AttributeName)
	if path.ValueExpression != nil {
		return setInList(m, k, path, value)
	}
	if sub := path.AttributePath.SubAttribute; sub != nil {
		inner, ok := m[k].(map[string]any)
		if !ok {
			inner = map[string]any{}
			m[k] = inner
		}
		inner[keyOf(inner, *sub)] = value
		return nil
	}
	setAttribute(m, k, value, replace)
	return nil
}

// setAttribute sets one attribute: add appends to a multi-valued one
// (skipping values it already holds) and merges into a complex one;
// replace swaps a multi-valued one whole and merges a complex one.
func setAttribute(m map[string]any, name string, value any, replace bool) {
	k := keyOf(m, name)
	switch v := value.(type) {
	case []any:
		if replace {
			m[k] = v
			return
		}
		list := asList(m[k])
		for _, item := range v {
			if !containsValue(list, item) {
				list = append(list, item)
			}
		}
		m[k] = list
	case map[string]any:
		inner, ok := m[k].(map[string]any)
		if !ok {
			m[k] = v
			return
		}
		for ik, iv := range v {
			inner[keyOf(inner, ik)] = iv
		}
	default:
		m[k] = v
	}
}

// setInList sets the elements of a multi-valued attribute that a value
// filter selects, or their sub-attribute.
func setInList(m map[string]any, k string, path *filter.Path, value any) error {
	list := asList(m[k])
	matched := false
	for _, item := range list {
		elem, ok := item.(map[string]any)
		if !ok || !matches(elem, path.ValueExpression) {
			continue
		}
		matched = true
		setElement(elem, path.SubAttribute, value)
	}
	if !matched {
		elem := equalities(path.ValueExpression)
		if elem == nil {
			return fmt.Errorf("%w: %s", ErrNoTarget, path)
		}
		setElement(elem, path.SubAttribute, value)
		list = append(list, elem)
	}
	m[k] = list
	return nil
}

func setElement(elem map[string]any, sub *string, value any) {
	if sub != nil {
		elem[keyOf(elem, *sub)] = value
		return
	}
	if obj, ok := value.(map[string]any); ok {
		for ik, iv := range obj {
			elem[keyOf(elem, ik)] = iv
		}
	}
}

func patchRemove(res map[string]any, path *filter.Path, value any) error {
	if path == nil {
		return fmt.Errorf("%w: remove needs a path", ErrNoTarget)
	}
	m := container(res, path.AttributePath, false)
	if m == nil {
		return nil
	}
	k := keyOf(m, path.AttributePath.AttributeName)
	switch {
	case path.ValueExpression != nil:
		kept := []any{}
		for _, item := range asList(m[k]) {
			elem, ok := item.(map[string]any)
			if !ok || !matches(elem, path.ValueExpression) {
				kept = append(kept, item)
				continue
			}
			if path.SubAttribute != nil {
				delete(elem, keyOf(elem, *path.SubAttribute))
				kept = append(kept, elem)
			}
		}
		m[k] = kept
	case path.AttributePath.SubAttribute != nil:
		if inner, ok := m[k].(map[string]any); ok {
			delete(inner, keyOf(inner, *path.AttributePath.SubAttribute))
		}
	default:
		listed, ok := value.([]any)
		if !ok || len(listed) == 0 {
			delete(m, k)
			return nil
		}
		// Entra ID removes members by listing them as the value.
		kept := []any{}
		for _, item := range asList(m[k]) {
			if !containsValue(listed, item) {
				kept = append(kept, item)
			}
		}
		m[k] = kept
	}
	return nil
}

// matches evaluates a value filter against one element of a multi-valued
// attribute. "value" compares exactly (it holds IDs); other
// sub-attributes, such as type, ignore case.
func matches(elem map[string]any, e filter.Expression) bool {
	switch e := e.(type) {
	case *filter.AttributeExpression:
		name := e.AttributePath.AttributeName
		if e.AttributePath.SubAttribute != nil {
			name = *e.AttributePath.SubAttribute
		}
		got, present := elem[keyOf(elem, name)]
		if e.Operator == filter.PR {
			return present && got != nil && got != ""
		}
		if !present || got == nil {
			return false
		}
		have, want := fmt.Sprint(got), fmt.Sprint(e.CompareValue)
		if !strings.EqualFold(name, "value") {
			have, want = strings.ToLower(have), strings.ToLower(want)
		}
		switch e.Operator {
		case filter.EQ:
			return have == want
		case filter.NE:
			return have != want
		case filter.CO:
			return strings.Contains(have, want)
		case filter.SW:
			return strings.HasPrefix(have, want)
		case filter.EW:
			return strings.HasSuffix(have, want)
		}
		return false
	case *filter.LogicalExpression:
		if e.Operator == filter.AND {
			return matches(elem, e.Left) && matches(elem, e.Right)
		}
		return matches(elem, e.Left) || matches(elem, e.Right)
	case *filter.NotExpression:
		return !matches(elem, e.Expression)
	}
	return false
}

// equalities is the element a filter of eq terms joined by and describes,
// or nil for any other filter.
func equalities(e filter.Expression) map[string]any {
	switch e := e.(type) {
	case *filter.AttributeExpression:
		if e.Operator != filter.EQ {
			return nil
		}
		return map[string]any{e.AttributePath.AttributeName: e.CompareValue}
	case *filter.LogicalExpression:
		if e.Operator != filter.AND {
			return nil
		}
		left, right := equalities(e.Left), equalities(e.Right)
		if left == nil || right == nil {
			return nil
		}
		for k, v := range right {
			left[k] = v
		}
		return left
	}
	return nil
}

// keyOf is the key m already uses for name, ignoring case (attribute
// names are case-insensitive), or name itself.
func keyOf(m map[string]any, name string) string {
	if _, ok := m[name]; ok {
		return name
	}
	for k := range m {
		if strings.EqualFold(k, name) {
			return k
		}
	}
	return name
}

func asList(v any) []any {
	list, _ := v.([]any)
	return list
}

// containsValue reports whether list holds item, comparing complex
// values by their "value" sub-attribute.
func containsValue(list []any, item any) bool {
	want := elementValue(item)
	for _, have := range list {
		if elementValue(have) == want {
			return true
		}
	}
	return false
}

func elementValue(v any) string {
	if m, ok := v.(map[string]any); ok {
		return fmt.Sprint(m[keyOf(m, "value")])
	}
	return fmt.Sprint(v)
}
