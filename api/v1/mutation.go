package v1

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/httpx"
	"github.com/cairnhq/cairn/api/platform/idempotency"
)

// IdempotencyHeader is embedded in the input of every mutation.
type IdempotencyHeader struct {
	IdempotencyKey string `header:"Idempotency-Key" doc:"1–255 visible ASCII characters. A retry with the same key and input returns the first answer; other input under the same key is a 409."`
}

// Mutated is the output of every mutation.
type Mutated[T any] struct {
	Status   int
	Replayed string `header:"Idempotent-Replayed" doc:"\"true\" when this answer is the stored answer of an earlier request with the same key."`
	Body     httpx.Envelope[T]
}

// mutation runs fn as one idempotent transaction: the key reservation, the
// mutation (with its audit evidence and any jobs it implies) and the stored
// response commit together or not at all. A replay unmarshals the stored
// data into T, so its body is byte-identical to the first answer apart from
// the fresh request ID.
func mutation[T any](ctx context.Context, a *API, key string, input any, status int,
	fn func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (T, error),
) (*Mutated[T], error) {
	p, err := access.PrincipalFrom(ctx)
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	if err := idempotency.ValidateKey(key); err != nil {
		return nil, a.fail(ctx, err)
	}
	canonical, err := json.Marshal(input)
	if err != nil {
		return nil, a.fail(ctx, fmt.Errorf("canonicalizing input: %w", err))
	}
	r := routeFrom(ctx)
	req := idempotency.Request{
		OrganizationID: p.OrganizationID,
		PrincipalID:    p.ID,
		Key:            key,
		Method:         r.method,
		Route:          r.path,
		Body:           canonical,
	}
	out := &Mutated[T]{}
	err = db.WithTx(ctx, a.deps.DB, func(tx *sqlx.Tx) error {
		stored, err := a.ledger.Reserve(ctx, tx, req)
		if err != nil {
			return err
		}
		if stored != nil {
			out.Status, out.Replayed = stored.Status, "true"
			return json.Unmarshal(stored.Body, &out.Body.Data)
		}
		data, err := fn(ctx, tx, p)
		if err != nil {
			return err
		}
		body, err := json.Marshal(data)
		if err != nil {
			return fmt.Errorf("serializing response: %w", err)
		}
		out.Status, out.Body.Data = status, data
		return a.ledger.Record(ctx, tx, req, idempotency.Response{Status: status, Body: body})
	})
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	return out, nil
}
