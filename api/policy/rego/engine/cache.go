package engine

import (
	"bytes"
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/cairnhq/cairn/api/policy/rego"
)

// Cache holds compiled policies by bundle digest, so a worker compiles
// each bundle once however many runs evaluate it. It keeps at most its
// size, dropping the least recently used. Loads of the same digest are
// shared: concurrent callers wait for one compilation. A failed load is
// not kept, so a passing storage fault is retried by the next caller.
// Safe for concurrent use.
type Cache struct {
	mu      sync.Mutex
	size    int
	entries map[string]*cacheEntry
	recent  *list.List // of *cacheEntry, most recently used first
}

type cacheEntry struct {
	digest string
	ready  chan struct{} // closed once policy or err is set
	policy *Policy
	err    error
	elem   *list.Element
}

// NewCache returns a cache of at most size policies (at least one).
func NewCache(size int) *Cache {
	return &Cache{size: max(size, 1), entries: map[string]*cacheEntry{}, recent: list.New()}
}

// Get returns the policy of the bundle whose SHA-256 (lowercase hex, as
// Digest writes it) is digest, calling open to read the bundle if it is
// not cached. The bytes read are checked against digest before they are
// parsed, so a cache key always names the code it holds; a mismatch is an
// *EvalError with CodeEvaluatorFailed, as are the errors of Load. Errors
// of open itself are returned wrapped.
func (c *Cache) Get(ctx context.Context, digest string, open func() (io.ReadCloser, error)) (*Policy, error) {
	c.mu.Lock()
	if e, ok := c.entries[digest]; ok {
		c.recent.MoveToFront(e.elem)
		c.mu.Unlock()
		select {
		case <-e.ready:
			return e.policy, e.err
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for policy %s: %w", digest, ctx.Err())
		}
	}
	e := &cacheEntry{digest: digest, ready: make(chan struct{})}
	e.elem = c.recent.PushFront(e)
	c.entries[digest] = e
	for c.recent.Len() > c.size {
		c.remove(c.recent.Back().Value.(*cacheEntry))
	}
	c.mu.Unlock()

	e.policy, e.err = loadVerified(ctx, digest, open)
	if e.err != nil {
		c.mu.Lock()
		c.remove(e)
		c.mu.Unlock()
	}
	close(e.ready)
	return e.policy, e.err
}

// remove drops e if it is still the entry for its digest; an entry evicted
// while loading may have been replaced by a newer one. Callers hold mu.
func (c *Cache) remove(e *cacheEntry) {
	if c.entries[e.digest] == e {
		delete(c.entries, e.digest)
	}
	c.recent.Remove(e.elem)
}

func loadVerified(ctx context.Context, digest string, open func() (io.ReadCloser, error)) (*Policy, error) {
	rc, err := open()
	if err != nil {
		return nil, fmt.Errorf("opening policy bundle %s: %w", digest, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(newBoundedReader(rc, rego.MaxBundleBytes))
	if errors.Is(err, errBound) {
		return nil, evalErr(rego.CodeEvaluatorFailed, fmt.Sprintf("bundle %s is over %d bytes", digest, rego.MaxBundleBytes))
	}
	if err != nil {
		return nil, fmt.Errorf("reading policy bundle %s: %w", digest, err)
	}
	if got := rego.Digest(b); got != digest {
		return nil, evalErr(rego.CodeEvaluatorFailed, fmt.Sprintf("bundle read for %s hashes to %s", digest, got))
	}
	return Load(ctx, bytes.NewReader(b))
}
