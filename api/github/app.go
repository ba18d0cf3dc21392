package github

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	gh "github.com/google/go-github/v66/github"

	"github.com/cairnhq/cairn/api/platform/config"
)

// App is the configured code-host app. A nil *App is an unconfigured one:
// every method that needs it fails closed with ErrUnconfigured.
type App struct {
	id            int64
	slug          string
	webhookSecret []byte
	apiURL        string
	apps          *ghinstallation.AppsTransport
	transport     http.RoundTripper
	// clientID and clientSecret authorize the installer (user
	// authorization during installation); empty refuses the flow.
	clientID     string
	clientSecret string
}

// NewApp reads the app's settings. Without an app ID, a private key and a
// webhook secret it returns nil (unconfigured); a key that is present but
// unreadable or malformed is an error, not a silent downgrade.
func NewApp(cfg config.Config) (*App, error) {
	return NewAppWithTransport(cfg, http.DefaultTransport)
}

// NewAppWithTransport is NewApp over a given HTTP transport.
func NewAppWithTransport(cfg config.Config, transport http.RoundTripper) (*App, error) {
	key := []byte(cfg.GitHubPrivateKey.Reveal())
	if len(key) == 0 && cfg.GitHubPrivateKeyFile != "" {
		b, err := os.ReadFile(cfg.GitHubPrivateKeyFile)
		if err != nil {
			return nil, fmt.Errorf("reading CAIRN_GITHUB_PRIVATE_KEY_FILE: %w", err)
		}
		key = b
	}
	secret := cfg.GitHubWebhookSecret.Reveal()
	if cfg.GitHubAppID <= 0 || len(key) == 0 || secret == "" {
		return nil, nil
	}
	if len(secret) < 16 {
		return nil, fmt.Errorf("CAIRN_GITHUB_WEBHOOK_SECRET is shorter than 16 bytes")
	}
	apiURL := strings.TrimRight(cfg.GitHubAPIURL, "/")
	u, err := url.Parse(apiURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("CAIRN_GITHUB_API_URL is not an http(s) URL")
	}
	apps, err := ghinstallation.NewAppsTransport(transport, cfg.GitHubAppID, key)
	if err != nil {
		return nil, fmt.Errorf("CAIRN_GITHUB_PRIVATE_KEY: %w", err)
	}
	apps.BaseURL = apiURL
	return &App{id: cfg.GitHubAppID, slug: cfg.GitHubAppSlug, webhookSecret: []byte(secret), apiURL: apiURL,
		apps: apps, transport: transport, clientID: cfg.GitHubClientID, clientSecret: cfg.GitHubClientSecret.Reveal()}, nil
}

// Ready reports whether the app is configured.
func (a *App) Ready() bool { return a != nil }

// VerifySignature checks X-Hub-Signature-256 over the raw body in
// constant time.
func (a *App) VerifySignature(header string, body []byte) error {
	if a == nil {
		return ErrUnconfigured
	}
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return ErrSignature
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil || len(got) != sha256.Size {
		return ErrSignature
	}
	mac := hmac.New(sha256.New, a.webhookSecret)
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return ErrSignature
	}
	return nil
}

// InstallURL is where a person installs the app, carrying the state.
// GitHub.com serves it under /apps, Enterprise Server under /github-apps.
// An installation cannot be bound without the user-authorization
// credentials, so the flow does not start without them either.
func (a *App) InstallURL(state string) (string, error) {
	if a == nil || a.slug == "" || a.clientID == "" || a.clientSecret == "" {
		return "", ErrUnconfigured
	}
	base := a.webURL() + "/github-apps/"
	if a.webURL() == "https://github.com" {
		base = "https://github.com/apps/"
	}
	return base + url.PathEscape(a.slug) + "/installations/new?state=" + url.QueryEscape(state), nil
}

// webURL is the code host's web origin: github.com for GitHub.com's API,
// the API's own origin for Enterprise Server.
func (a *App) webURL() string {
	u, _ := url.Parse(a.apiURL)
	if u.Host == "api.github.com" {
		return "https://github.com"
	}
	return u.Scheme + "://" + u.Host
}

func (a *App) client(rt http.RoundTripper) *gh.Client {
	c := gh.NewClient(&http.Client{Transport: rt, Timeout: 2 * time.Minute})
	c.BaseURL, _ = url.Parse(a.apiURL + "/")
	c.UploadURL = c.BaseURL
	return c
}

// installationClient authenticates as one installation with a token it
// exchanges for on first use and keeps only in memory.
func (a *App) installationClient(installationID int64) (*gh.Client, http.RoundTripper) {
	itr := ghinstallation.NewFromAppsTransport(a.apps, installationID)
	itr.BaseURL = a.apiURL
	return a.client(itr), itr
}

// ProviderInstallation is an installation as the provider reports it now.
type ProviderInstallation struct {
	ID           int64
	AccountLogin string
	AccountID    int64
	Suspended    bool
}

// errGone: the provider says the installation does not exist (any more).
var errGone = errors.New("installation not found at the provider")

// Installation reads an installation with the app's own JWT.
func (a *App) Installation(ctx context.Context, installationID int64) (ProviderInstallation, error) {
	if a == nil {
		return ProviderInstallation{}, ErrUnconfigured
	}
	in, resp, err := a.client(a.apps).Apps.GetInstallation(ctx, installationID)
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		return ProviderInstallation{}, errGone
	}
	if err != nil {
		return ProviderInstallation{}, fmt.Errorf("reading installation: %w", err)
	}
	return ProviderInstallation{ID: in.GetID(), AccountLogin: in.GetAccount().GetLogin(), AccountID: in.GetAccount().GetID(),
		Suspended: in.SuspendedAt != nil}, nil
}

// ProviderRepository is a repository an installation is granted.
type ProviderRepository struct {
	ID    int64
	Owner string
	Name  string
}

// maxRepositoryPages bounds the selected-repository read (100 a page).
const maxRepositoryPages = 100

// Repositories reads the complete current set of repositories the
// installation is granted, every page of it.
func (a *App) Repositories(ctx context.Context, installationID int64) ([]ProviderRepository, error) {
	if a == nil {
		return nil, ErrUnconfigured
	}
	c, _ := a.installationClient(installationID)
	var out []ProviderRepository
	opt := &gh.ListOptions{PerPage: 100}
	for range maxRepositoryPages {
		page, resp, err := c.Apps.ListRepos(ctx, opt)
		if err != nil {
			return nil, fmt.Errorf("listing installation repositories: %w", err)
		}
		for _, r := range page.Repositories {
			out = append(out, ProviderRepository{ID: r.GetID(), Owner: r.GetOwner().GetLogin(), Name: r.GetName()})
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opt.Page = resp.NextPage
	}
	return nil, fmt.Errorf("installation lists more than %d pages of repositories", maxRepositoryPages)
}

// Commit resolves a ref to its full commit SHA and message.
func (a *App) Commit(ctx context.Context, installationID int64, owner, name, ref string) (string, string, error) {
	c, _ := a.installationClient(installationID)
	commit, _, err := c.Repositories.GetCommit(ctx, owner, name, ref, nil)
	if err != nil {
		return "", "", fmt.Errorf("resolving commit: %w", err)
	}
	return commit.GetSHA(), commit.GetCommit().GetMessage(), nil
}

// Tarball opens the archive of exactly one commit. The provider redirects
// to a short-lived download URL, which the client follows.
func (a *App) Tarball(ctx context.Context, installationID int64, owner, name, sha string) (io.ReadCloser, int64, error) {
	_, rt := a.installationClient(installationID)
	u := fmt.Sprintf("%s/repos/%s/%s/tarball/%s", a.apiURL, url.PathEscape(owner), url.PathEscape(name), sha)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("downloading archive: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, 0, fmt.Errorf("downloading archive: provider answered %d", resp.StatusCode)
	}
	return resp.Body, resp.ContentLength, nil
}

// maxPullFiles is how many changed files the provider lists for a pull
// request at most; a list that long may be incomplete.
const maxPullFiles = 3000

// PullFiles reads a pull request's changed paths, every page. complete is
// false when the provider's cap was reached: the caller must not skip.
func (a *App) PullFiles(ctx context.Context, installationID int64, owner, name string, number int) ([]string, bool, error) {
	c, _ := a.installationClient(installationID)
	var out []string
	opt := &gh.ListOptions{PerPage: 100}
	for {
		page, resp, err := c.PullRequests.ListFiles(ctx, owner, name, number, opt)
		if err != nil {
			return nil, false, fmt.Errorf("listing pull request files: %w", err)
		}
		for _, f := range page {
			out = append(out, f.GetFilename())
			if f.GetPreviousFilename() != "" {
				out = append(out, f.GetPreviousFilename())
			}
		}
		if resp.NextPage == 0 {
			return out, len(out) < maxPullFiles, nil
		}
		if len(out) >= maxPullFiles {
			return out, false, nil
		}
		opt.Page = resp.NextPage
	}
}
