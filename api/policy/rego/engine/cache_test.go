package engine_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/policy/rego"
	"github.com/cairnhq/cairn/api/policy/rego/engine"
)

// opener serves one bundle and counts how often it was opened.
type opener struct {
	bundle []byte
	opens  atomic.Int32
	err    error
}

func (o *opener) open() (io.ReadCloser, error) {
	o.opens.Add(1)
	if o.err != nil {
		return nil, o.err
	}
	return io.NopCloser(bytes.NewReader(o.bundle)), nil
}

func policyBundle(t *testing.T, findings string) []byte {
	t.Helper()
	return mustBuild(t, map[string]string{"p.rego": "package cairn.v1\n\ndecision := {\"findings\": " + findings + "}\n"})
}

func TestCacheCompilesEachBundleOnce(t *testing.T) {
	t.Parallel()
	o := &opener{bundle: policyBundle(t, "[]")}
	digest := rego.Digest(o.bundle)
	c := engine.NewCache(4)
	var wg sync.WaitGroup
	policies := make([]*engine.Policy, 16)
	for i := range policies {
		wg.Go(func() {
			p, err := c.Get(context.Background(), digest, o.open)
			if err != nil {
				t.Error(err)
			}
			policies[i] = p
		})
	}
	wg.Wait()
	if n := o.opens.Load(); n != 1 {
		t.Fatalf("bundle opened %d times", n)
	}
	for _, p := range policies {
		if p != policies[0] {
			t.Fatal("callers got different policies for one digest")
		}
	}
	if _, err := policies[0].Evaluate(context.Background(), parsedInput(t, validInput()), time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestCacheRefusesBytesThatDoNotMatchTheDigest(t *testing.T) {
	t.Parallel()
	good := policyBundle(t, "[]")
	o := &opener{bundle: policyBundle(t, `[{"id": "x", "title": "t", "message": "m"}]`)}
	_, err := engine.NewCache(4).Get(context.Background(), rego.Digest(good), o.open)
	wantCode(t, err, rego.CodeEvaluatorFailed)
	wantDetail(t, err, "hashes to")
}

func TestCacheDoesNotKeepFailures(t *testing.T) {
	t.Parallel()
	o := &opener{bundle: policyBundle(t, "[]"), err: errors.New("storage down")}
	c := engine.NewCache(4)
	digest := rego.Digest(o.bundle)
	if _, err := c.Get(context.Background(), digest, o.open); !errors.Is(err, o.err) {
		t.Fatalf("err %v, want the opener's", err)
	}
	o.err = nil
	if _, err := c.Get(context.Background(), digest, o.open); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
	if n := o.opens.Load(); n != 2 {
		t.Fatalf("opened %d times, want 2", n)
	}
}

func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	a := &opener{bundle: policyBundle(t, "[]")}
	b := &opener{bundle: policyBundle(t, `[{"id": "b", "title": "t", "message": "m"}]`)}
	d := &opener{bundle: policyBundle(t, `[{"id": "d", "title": "t", "message": "m"}]`)}
	c := engine.NewCache(2)
	get := func(o *opener) {
		t.Helper()
		if _, err := c.Get(context.Background(), rego.Digest(o.bundle), o.open); err != nil {
			t.Fatal(err)
		}
	}
	get(a)
	get(b)
	get(a) // a is now the most recently used
	get(d) // evicts b
	get(a)
	get(b)
	if n := a.opens.Load(); n != 1 {
		t.Errorf("a opened %d times, want 1", n)
	}
	if n := b.opens.Load(); n != 2 {
		t.Errorf("b opened %d times, want 2 (evicted once)", n)
	}
}
