package v1

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/cursor"
	"github.com/cairnhq/cairn/api/platform/httpx"
	"github.com/cairnhq/cairn/api/problem"
)

// ListParams are the query parameters of every cursor list.
type ListParams struct {
	Limit  int    `query:"limit" minimum:"1" maximum:"100" default:"20" doc:"Page size, 1–100."`
	Cursor string `query:"cursor" doc:"The next_cursor of the previous page of this same list; any other value is rejected."`
}

// Listed is the output of every cursor list.
type Listed[T any] struct {
	Body httpx.ListEnvelope[T]
}

// listSpec names one cursor list: the endpoint its cursors are bound to and
// the code its invalid cursors get.
type listSpec struct {
	endpoint    string
	invalidCode string
	// maxAge, when set, dates the list's cursors: one older than it, or
	// one issued before the list dated them, is outdated and refused.
	maxAge time.Duration
}

// codec is the cursor codec of the list.
func (a *API) codec(spec listSpec) cursor.Codec { return a.cursors.Dated(spec.maxAge) }

// pageOf decodes the page request of a list, turning a bad cursor into the
// list's own error code.
func (a *API) pageOf(spec listSpec, filters string, params ListParams) (cursor.Page, error) {
	page, err := a.codec(spec).Request(spec.endpoint, filters, params.Cursor, params.Limit)
	if errors.Is(err, cursor.ErrInvalid) {
		return cursor.Page{}, problem.Coded{Problem: httpx.Problem{Status: http.StatusBadRequest, Code: spec.invalidCode}}
	}
	return page, err
}

// listed trims rows fetched with page.Limit+1 and builds the list response.
func listed[T any](a *API, spec listSpec, filters string, page cursor.Page, rows []T, position func(T) cursor.Position) *Listed[T] {
	rows, next := cursor.Next(a.codec(spec), spec.endpoint, filters, page, rows, position)
	out := &Listed[T]{}
	out.Body.Data = rows
	out.Body.Meta.Page.NextCursor = next
	return out
}

// listOf is the whole flow of a list handler: find the principal, decode
// the page, fetch, trim.
func listOf[T any](ctx context.Context, a *API, spec listSpec, filters string, params ListParams,
	fetch func(p access.Principal, page cursor.Page) ([]T, error), position func(T) cursor.Position,
) (*Listed[T], error) {
	p, err := access.PrincipalFrom(ctx)
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	page, err := a.pageOf(spec, filters, params)
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	rows, err := fetch(p, page)
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	return listed(a, spec, filters, page, rows, position), nil
}
