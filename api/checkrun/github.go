package checkrun

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v66/github"
)

// httpTimeout bounds each provider call, well inside the default lease.
const httpTimeout = 10 * time.Second

// App is the code-host app's identity: enough to mint installation tokens.
type App struct {
	ID         int64
	PrivateKey []byte
	// BaseURL is the REST API root; empty means GitHub.com.
	BaseURL string
}

// AppClients returns installation clients of app, one transport per
// installation so each token is minted once and reused until it expires.
// The tokens stay inside the transports: never stored or logged.
func AppClients(app App) (Clients, error) {
	if app.ID <= 0 || len(app.PrivateKey) == 0 {
		return nil, ErrNoProvider
	}
	base := strings.TrimRight(app.BaseURL, "/")
	var apiURL *url.URL
	if base != "" {
		u, err := url.Parse(base + "/")
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("code-host API URL %q is not an absolute http(s) URL", app.BaseURL)
		}
		apiURL = u
	}
	var mu sync.Mutex
	clients := map[int64]*github.Client{}
	return func(_ context.Context, installationID int64) (*github.Client, error) {
		mu.Lock()
		defer mu.Unlock()
		if c := clients[installationID]; c != nil {
			return c, nil
		}
		tr, err := ghinstallation.New(http.DefaultTransport, app.ID, installationID, app.PrivateKey)
		if err != nil {
			return nil, fmt.Errorf("code-host app key: %w", err)
		}
		if base != "" {
			tr.BaseURL = base
		}
		c := github.NewClient(&http.Client{Transport: tr, Timeout: httpTimeout})
		if apiURL != nil {
			c.BaseURL = apiURL
		}
		clients[installationID] = c
		return c, nil
	}, nil
}
