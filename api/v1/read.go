package v1

import (
	"context"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/httpx"
)

// Single is the output of every single-object read.
type Single[T any] struct {
	Body httpx.Envelope[T]
}

// single runs a read as the request's principal and envelopes the result.
func single[T any](ctx context.Context, a *API, read func(p access.Principal) (T, error)) (*Single[T], error) {
	p, err := access.PrincipalFrom(ctx)
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	data, err := read(p)
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	out := &Single[T]{}
	out.Body.Data = data
	return out, nil
}

// whole runs the read of a list that is never paged and envelopes it as a
// cursor list (SPEC §2 Response envelopes) whose next_cursor is always
// null: every row is on its one page.
func whole[T any](ctx context.Context, a *API, read func(p access.Principal) ([]T, error)) (*Listed[T], error) {
	p, err := access.PrincipalFrom(ctx)
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	rows, err := read(p)
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	out := &Listed[T]{}
	out.Body.Data = rows
	return out, nil
}

func mapSlice[T, U any](in []T, f func(T) U) []U {
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}
