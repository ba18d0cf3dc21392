package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Key set cache bounds: keys are fetched again after keyTTL, and an
// unknown key ID fetches at most once per keyRetry, so a flood of forged
// key IDs cannot turn into a flood of requests to the API.
const (
	keyTTL      = 5 * time.Minute
	keyRetry    = 30 * time.Second
	keyMaxBytes = 64 << 10
)

// keySet is the API's JWKS, fetched on demand and cached. Without keys
// (the API unreachable, no AUTH_SECRET there) nothing verifies, so every
// request is 401: the endpoint never opens for lack of keys.
type keySet struct {
	url    string
	client *http.Client

	mu        sync.Mutex
	keys      jose.JSONWebKeySet
	fetchedAt time.Time
	triedAt   time.Time
}

// get returns the cached keys, refreshed when stale or when kid is not
// among them.
func (k *keySet) get(ctx context.Context, kid string) jose.JSONWebKeySet {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	stale := now.Sub(k.fetchedAt) > keyTTL
	unknown := len(k.keys.Key(kid)) == 0
	if (stale || unknown) && now.Sub(k.triedAt) >= keyRetry || k.fetchedAt.IsZero() && now.Sub(k.triedAt) >= time.Second {
		k.triedAt = now
		if keys, err := k.fetch(ctx); err == nil {
			k.keys, k.fetchedAt = keys, now
		} else if stale {
			// Stale keys are dropped, not trusted forever.
			k.keys = jose.JSONWebKeySet{}
		}
	}
	return k.keys
}

func (k *keySet) fetch(ctx context.Context) (jose.JSONWebKeySet, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return jose.JSONWebKeySet{}, err
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return jose.JSONWebKeySet{}, fmt.Errorf("fetching keys: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return jose.JSONWebKeySet{}, fmt.Errorf("fetching keys: status %d", resp.StatusCode)
	}
	var keys jose.JSONWebKeySet
	if err := json.NewDecoder(io.LimitReader(resp.Body, keyMaxBytes)).Decode(&keys); err != nil {
		return jose.JSONWebKeySet{}, fmt.Errorf("decoding keys: %w", err)
	}
	return keys, nil
}
