package inprocess

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/api/policy/rego"
	"github.com/cairnhq/cairn/api/policy/rego/engine"
)

// Evaluator evaluates a run's policies in this process, compiling each
// snapshotted bundle once into its cache.
type Evaluator struct {
	policies *policy.Service
	bundles  *engine.Cache
}

var _ policy.Evaluator = (*Evaluator)(nil)

// New returns an Evaluator reading bundles through policies, as a
// sandboxed evaluation reads them through its grant.
func New(policies *policy.Service) *Evaluator {
	return &Evaluator{policies: policies, bundles: engine.NewCache(256)}
}

// Evaluate parses the input once and evaluates it against every request,
// grouped by timeout.
func (e *Evaluator) Evaluate(ctx context.Context, input []byte, requests []policy.EvaluationRequest) []policy.Outcome {
	outcomes := make([]policy.Outcome, len(requests))
	value, err := engine.ParseInput(input)
	if err != nil {
		for i := range outcomes {
			outcomes[i].Err = err
		}
		return outcomes
	}
	byTimeout := map[time.Duration][]int{}
	for i, r := range requests {
		byTimeout[r.Timeout] = append(byTimeout[r.Timeout], i)
	}
	for timeout, indexes := range byTimeout {
		loaders := make([]Loader, len(indexes))
		for j, i := range indexes {
			r := requests[i]
			loaders[j] = func(ctx context.Context) (*engine.Policy, error) { return e.load(ctx, r) }
		}
		for j, o := range EvaluateAll(ctx, value, timeout, loaders) {
			outcomes[indexes[j]] = o
		}
	}
	return outcomes
}

// load returns the request's compiled bundle from the cache, reading and
// verifying the snapshotted one on a miss. The service's refusals become
// the codes a sandboxed evaluation would report for them.
func (e *Evaluator) load(ctx context.Context, r policy.EvaluationRequest) (*engine.Policy, error) {
	entry := policy.SnapshotEntry{RunID: r.RunID, Sequence: r.Sequence, PolicyVersionID: r.PolicyVersionID, BundleSHA256: r.BundleSHA256}
	return e.bundles.Get(ctx, hex.EncodeToString(r.BundleSHA256), func() (io.ReadCloser, error) {
		rc, _, err := e.policies.OpenSnapshotBundle(ctx, r.OrganizationID, entry)
		switch {
		case errors.Is(err, fault.ErrConflict):
			return nil, &rego.EvalError{Code: rego.CodeBundleMismatch, Detail: err.Error()}
		case err != nil:
			return nil, &rego.EvalError{Code: rego.CodeBundleUnavailable, Detail: err.Error()}
		}
		return rc, nil
	})
}

// Loader returns one attachment's compiled policy.
type Loader func(ctx context.Context) (*engine.Policy, error)

// EvaluateAll evaluates one input against every policy in this process,
// as many at once as there are processors (OPA evaluation is
// single-threaded and CPU-bound), and returns the outcomes in the
// policies' order. Each evaluation has its own timeout.
func EvaluateAll(ctx context.Context, input ast.Value, timeout time.Duration, policies []Loader) []policy.Outcome {
	outcomes := make([]policy.Outcome, len(policies))
	slots := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	var wg sync.WaitGroup
	for i, load := range policies {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			began := time.Now()
			p, err := load(ctx)
			var d rego.Decision
			if err == nil {
				d, err = p.Evaluate(ctx, input, timeout)
			}
			if err == nil {
				outcomes[i].Decision, err = json.Marshal(d)
			}
			outcomes[i].Err, outcomes[i].Duration = err, time.Since(began)
		})
	}
	wg.Wait()
	return outcomes
}
