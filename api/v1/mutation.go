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

// keyedRequest is the idempotency identity of the current request: the
// principal, the key, the operation's resolved target and the canonical
// input.
func keyedRequest(ctx context.Context, key string, input any) (access.Principal, idempotency.Request, error) {
	p, err := access.PrincipalFrom(ctx)
	if err != nil {
		return access.Principal{}, idempotency.Request{}, err
	}
	if err := idempotency.ValidateKey(key); err != nil {
		return access.Principal{}, idempotency.Request{}, err
	}
	canonical, err := json.Marshal(input)
	if err != nil {
		return access.Principal{}, idempotency.Request{}, fmt.Errorf("canonicalizing input: %w", err)
	}
	r := routeFrom(ctx)
	// An agent's keys are its grant's own: neither the person nor another
	// of their agents replays (or collides with) what it did, and its
	// stored answers were computed for its narrower permissions.
	principalID := p.ID
	if p.Agent != nil {
		principalID = p.ID + "/agent/" + p.Agent.GrantID
	}
	return p, idempotency.Request{
		OrganizationID: p.OrganizationID,
		PrincipalID:    principalID,
		Key:            key,
		Method:         r.method,
		Route:          r.template,
		Path:           r.path,
		Query:          r.query,
		Body:           canonical,
	}, nil
}

// replayed fills out with a stored answer. Its data unmarshals into T, so
// the body is byte-identical to the first answer apart from the fresh
// request ID.
func replayed[T any](out *Mutated[T], stored *idempotency.Response) error {
	out.Status, out.Replayed = stored.Status, "true"
	return json.Unmarshal(stored.Body, &out.Body.Data)
}

// record stores data as the answer of req in tx and sets it on out.
func record[T any](ctx context.Context, a *API, tx *sqlx.Tx, req idempotency.Request, out *Mutated[T], status int, data T) error {
	body, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("serializing response: %w", err)
	}
	out.Status, out.Body.Data = status, data
	return a.ledger.Record(ctx, tx, req, idempotency.Response{Status: status, Body: body})
}

// mutation runs fn as one idempotent transaction: the key reservation, the
// mutation (with its audit evidence and any jobs it implies) and the stored
// response commit together or not at all.
func mutation[T any](ctx context.Context, a *API, key string, input any, status int,
	fn func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (T, error),
) (*Mutated[T], error) {
	p, req, err := keyedRequest(ctx, key, input)
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	out := &Mutated[T]{}
	err = db.WithTx(ctx, a.deps.DB, func(tx *sqlx.Tx) error {
		stored, err := a.ledger.Reserve(ctx, tx, req)
		if err != nil {
			return err
		}
		if stored != nil {
			return replayed(out, stored)
		}
		data, err := fn(ctx, tx, p)
		if err != nil {
			return err
		}
		return record(ctx, a, tx, req, out, status, data)
	})
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	return out, nil
}

// heldMutation is mutation for a use case that commits in several
// transactions of its own. The key is held for the whole call, so a
// concurrent retry is IDEMPOTENCY_IN_PROGRESS; fn hands settle to the use
// case, which calls it inside its final transaction to compute and record
// the answer, so the answer commits exactly when the mutation does.
func heldMutation[T any](ctx context.Context, a *API, key string, input any, status int,
	fn func(ctx context.Context, p access.Principal, settle func(ctx context.Context, tx *sqlx.Tx, data T) error) error,
) (*Mutated[T], error) {
	p, req, err := keyedRequest(ctx, key, input)
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	select {
	case a.holds <- struct{}{}:
		defer func() { <-a.holds }()
	case <-ctx.Done():
		return nil, a.fail(ctx, ctx.Err())
	}
	hold, err := a.ledger.Hold(ctx, a.deps.DB, req)
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	defer hold.Release()
	out := &Mutated[T]{}
	if hold.Stored != nil {
		if err := replayed(out, hold.Stored); err != nil {
			return nil, a.fail(ctx, err)
		}
		return out, nil
	}
	settled := false
	err = fn(ctx, p, func(ctx context.Context, tx *sqlx.Tx, data T) error {
		settled = true
		return record(ctx, a, tx, req, out, status, data)
	})
	if err == nil && !settled {
		err = fmt.Errorf("%s %s committed without recording its answer", req.Method, req.Route)
	}
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	return out, nil
}
