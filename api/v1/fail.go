package v1

import (
	"context"

	"github.com/cairnhq/cairn/api/platform/httpx"
	"github.com/cairnhq/cairn/api/problem"
)

func (a *API) problemFor(ctx context.Context, err error) httpx.Problem {
	return problem.Of(ctx, a.deps.Logger, err)
}

// fail turns err into the error a handler returns to huma.
func (a *API) fail(ctx context.Context, err error) error {
	return httpx.NewErrorBody(a.problemFor(ctx, err))
}
