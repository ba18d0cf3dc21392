package scim

import (
	"fmt"
	"strings"

	"github.com/scim2/filter-parser/v2"
)

// columnKind is how a filterable attribute is stored.
type columnKind int

const (
	// textFolded is text compared without case (userName, displayName).
	textFolded columnKind = iota
	// textExact is text compared exactly (externalId, id).
	textExact
	// boolean is a true/false attribute (active).
	boolean
	// elements is a multi-valued attribute whose elements a correlated
	// subquery reads: expr holds the subquery's FROM and WHERE with %s
	// where the element condition goes, and elementColumns names the
	// sub-attributes' SQL, compared without case.
	elements
)

type column struct {
	expr           string
	kind           columnKind
	elementColumns map[string]string
	// defaultSub is the sub-attribute a filter on the attribute itself
	// means (emails eq "…" is emails.value eq "…").
	defaultSub string
	// exactElements compares the sub-attributes exactly (member IDs).
	exactElements bool
}

// columns maps lower-cased attribute paths ("username", "emails.value")
// to their SQL.
type columns map[string]column

// userColumns are what a Users filter may name (aliases su: scim_users,
// u: users).
var userColumns = columns{
	"username":    {expr: "su.user_name", kind: textFolded},
	"externalid":  {expr: "su.external_id", kind: textExact},
	"displayname": {expr: "su.display_name", kind: textFolded},
	"id":          {expr: "su.user_id", kind: textExact},
	"active":      {expr: "(u.banned_at IS NULL)", kind: boolean},
	"emails": {expr: "jsonb_array_elements(CASE jsonb_typeof(su.attributes->'emails') WHEN 'array' THEN su.attributes->'emails' ELSE '[]' END) e WHERE %s",
		kind: elements, defaultSub: "value",
		elementColumns: map[string]string{"value": "e->>'value'", "type": "e->>'type'", "primary": "e->>'primary'"}},
}

// groupColumns are what a Groups filter may name (aliases t: teams,
// g: scim_groups).
var groupColumns = columns{
	"displayname": {expr: "t.name", kind: textFolded},
	"externalid":  {expr: "g.external_id", kind: textExact},
	"id":          {expr: "t.id", kind: textExact},
	"members": {expr: "team_members e JOIN scim_users mu ON mu.user_id = e.user_id AND mu.organization_id = t.organization_id AND mu.deleted_at IS NULL WHERE e.team_id = t.id AND %s",
		kind: elements, defaultSub: "value", exactElements: true,
		elementColumns: map[string]string{"value": "e.user_id"}},
}

// sqlFilter is a compiled filter: a condition with $n placeholders
// numbered after the query's own arguments.
type sqlFilter struct {
	cond string
	args []any
}

// compileFilter translates a SCIM filter into a SQL condition over cols.
// eq on userName compares lower() to lower(), which is the unique index's
// expression, so the lookup every provisioning client makes before a
// create is an index scan. Attributes or operators outside cols are
// ErrUnsupportedFilter.
func compileFilter(e filter.Expression, cols columns, firstArg int) (sqlFilter, error) {
	c := &compiler{cols: cols, next: firstArg}
	cond, err := c.expr(e)
	if err != nil {
		return sqlFilter{}, err
	}
	return sqlFilter{cond: cond, args: c.args}, nil
}

type compiler struct {
	cols columns
	args []any
	next int
}

func (c *compiler) arg(v any) string {
	c.args = append(c.args, v)
	c.next++
	return fmt.Sprintf("$%d", c.next-1)
}

func (c *compiler) expr(e filter.Expression) (string, error) {
	switch e := e.(type) {
	case *filter.LogicalExpression:
		return logical(e, c.expr)
	case *filter.NotExpression:
		inner, err := c.expr(e.Expression)
		if err != nil {
			return "", err
		}
		return "NOT coalesce(" + inner + ", false)", nil
	case *filter.AttributeExpression:
		name := strings.ToLower(e.AttributePath.AttributeName)
		col, ok := c.cols[name]
		if !ok {
			return "", fmt.Errorf("%w: attribute %s", ErrUnsupportedFilter, e.AttributePath)
		}
		if col.kind == elements {
			sub := col.defaultSub
			if e.AttributePath.SubAttribute != nil {
				sub = strings.ToLower(*e.AttributePath.SubAttribute)
			}
			cond, err := c.element(col, sub, e)
			if err != nil {
				return "", err
			}
			return "EXISTS (SELECT 1 FROM " + fmt.Sprintf(col.expr, cond) + ")", nil
		}
		if e.AttributePath.SubAttribute != nil {
			return "", fmt.Errorf("%w: attribute %s", ErrUnsupportedFilter, e.AttributePath)
		}
		return c.compare(col.expr, col.kind, e.Operator, e.CompareValue)
	case *filter.ValuePath:
		col, ok := c.cols[strings.ToLower(e.AttributePath.AttributeName)]
		if !ok || col.kind != elements {
			return "", fmt.Errorf("%w: attribute %s", ErrUnsupportedFilter, e.AttributePath)
		}
		cond, err := c.elementFilter(col, e.ValueFilter)
		if err != nil {
			return "", err
		}
		return "EXISTS (SELECT 1 FROM " + fmt.Sprintf(col.expr, cond) + ")", nil
	}
	return "", fmt.Errorf("%w: expression %v", ErrUnsupportedFilter, e)
}

// logical joins the compiled sides of an and or or.
func logical(e *filter.LogicalExpression, side func(filter.Expression) (string, error)) (string, error) {
	left, err := side(e.Left)
	if err != nil {
		return "", err
	}
	right, err := side(e.Right)
	if err != nil {
		return "", err
	}
	op := "AND"
	if e.Operator == filter.OR {
		op = "OR"
	}
	return "(" + left + " " + op + " " + right + ")", nil
}

// elementFilter compiles the filter inside a value path, whose attribute
// names are the element's sub-attributes.
func (c *compiler) elementFilter(col column, e filter.Expression) (string, error) {
	switch e := e.(type) {
	case *filter.LogicalExpression:
		return logical(e, func(side filter.Expression) (string, error) { return c.elementFilter(col, side) })
	case *filter.AttributeExpression:
		return c.element(col, strings.ToLower(e.AttributePath.AttributeName), e)
	}
	return "", fmt.Errorf("%w: expression %v", ErrUnsupportedFilter, e)
}

func (c *compiler) element(col column, sub string, e *filter.AttributeExpression) (string, error) {
	expr, ok := col.elementColumns[sub]
	if !ok {
		return "", fmt.Errorf("%w: attribute %s", ErrUnsupportedFilter, e.AttributePath)
	}
	kind := textFolded
	if col.exactElements {
		kind = textExact
	}
	return c.compare(expr, kind, e.Operator, e.CompareValue)
}

// compare is one comparison; a NULL attribute satisfies none but "not
// present".
func (c *compiler) compare(expr string, kind columnKind, op filter.CompareOperator, value any) (string, error) {
	if op == filter.PR {
		if kind == boolean {
			return "true", nil
		}
		return "(" + expr + " IS NOT NULL AND " + expr + " <> '')", nil
	}
	if kind == boolean {
		b, ok := value.(bool)
		if !ok || (op != filter.EQ && op != filter.NE) {
			return "", fmt.Errorf("%w: %s on a boolean", ErrUnsupportedFilter, op)
		}
		if op == filter.NE {
			b = !b
		}
		return expr + " = " + c.arg(b), nil
	}
	s, ok := value.(string)
	if !ok {
		return "", fmt.Errorf("%w: %s takes a string", ErrUnsupportedFilter, op)
	}
	lhs := expr
	if kind == textFolded {
		lhs, s = "lower("+expr+")", strings.ToLower(s)
	}
	switch op {
	case filter.EQ:
		return lhs + " = " + c.arg(s), nil
	case filter.NE:
		return "coalesce(" + lhs + " <> " + c.arg(s) + ", true)", nil
	case filter.CO:
		return "strpos(" + lhs + ", " + c.arg(s) + ") > 0", nil
	case filter.SW:
		return "starts_with(" + lhs + ", " + c.arg(s) + ")", nil
	case filter.EW:
		return "right(" + lhs + ", length(" + c.arg(s) + ")) = " + c.arg(s), nil
	}
	return "", fmt.Errorf("%w: operator %s", ErrUnsupportedFilter, op)
}
