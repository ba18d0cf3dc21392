package github

import (
	"context"
	"sync"

	gh "github.com/google/go-github/v66/github"
)

// CheckClients returns the installation clients check runs are published
// through (package checkrun): one per installation, kept so its token is
// exchanged once and reused until it expires, in memory only. A nil app
// returns nil: publication then fails closed.
func (a *App) CheckClients() func(ctx context.Context, installationID int64) (*gh.Client, error) {
	if a == nil {
		return nil
	}
	var mu sync.Mutex
	clients := map[int64]*gh.Client{}
	return func(_ context.Context, installationID int64) (*gh.Client, error) {
		mu.Lock()
		defer mu.Unlock()
		if c := clients[installationID]; c != nil {
			return c, nil
		}
		c, _ := a.installationClient(installationID)
		clients[installationID] = c
		return c, nil
	}
}
