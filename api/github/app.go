package github

import (
	"context"
	"crypto/hmac"
	"crypto/rsa"
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
	"github.com/golang-jwt/jwt/v4"
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
	key           *rsa.PrivateKey
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
	rsaKey, err := jwt.ParseRSAPrivateKeyFromPEM(key)
	if err != nil {
		return nil, fmt.Errorf("CAIRN_GITHUB_PRIVATE_KEY: %w", err)
	}
	a := &App{id: cfg.GitHubAppID, slug: cfg.GitHubAppSlug, webhookSecret: []byte(secret), apiURL: apiURL, key: rsaKey,
		transport: transport, clientID: cfg.GitHubClientID, clientSecret: cfg.GitHubClientSecret.Reveal()}
	a.apps = a.appsTransport()
	return a, nil
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

// appsTransport authenticates as the app itself, with JWTs signed by its
// key.
func (a *App) appsTransport() *ghinstallation.AppsTransport {
	apps := ghinstallation.NewAppsTransportFromPrivateKey(a.transport, a.id, a.key)
	apps.BaseURL = a.apiURL
	return apps
}

// installationClient authenticates as one installation with a token it
// exchanges for on first use and keeps only in memory. Each gets an apps
// transport of its own: exchanging a token writes to the apps transport
// it came from, so one shared by installation transports working at once
// (concurrent ingestions, check syncs) would be a data race.
func (a *App) installationClient(installationID int64) (*gh.Client, http.RoundTripper) {
	itr := ghinstallation.NewFromAppsTransport(a.appsTransport(), installationID)
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

// ID is the app's own ID, as the provider reports it on everything the app
// writes (check runs).
func (a *App) ID() int64 {
	if a == nil {
		return 0
	}
	return a.id
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

// maxArchiveRedirects bounds the redirects an archive download follows.
const maxArchiveRedirects = 5

// Tarball opens the archive of exactly one commit. The provider answers
// with a redirect to a short-lived signed URL on another host (codeload),
// which is followed by hand: only the API's own origin ever receives the
// installation token, which the installation transport would otherwise
// add to every request, redirected ones included. A redirect from https
// to http is refused.
func (a *App) Tarball(ctx context.Context, installationID int64, owner, name, sha string) (io.ReadCloser, int64, error) {
	_, rt := a.installationClient(installationID)
	api, err := url.Parse(a.apiURL)
	if err != nil {
		return nil, 0, fmt.Errorf("downloading archive: %w", err)
	}
	target, err := url.Parse(fmt.Sprintf("%s/repos/%s/%s/tarball/%s", a.apiURL, url.PathEscape(owner), url.PathEscape(name), sha))
	if err != nil {
		return nil, 0, fmt.Errorf("downloading archive: %w", err)
	}
	for range maxArchiveRedirects + 1 {
		transport := a.transport
		if target.Scheme == api.Scheme && target.Host == api.Host {
			transport = rt
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.String(), nil)
		if err != nil {
			return nil, 0, err
		}
		resp, err := (&http.Client{Transport: transport, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}}).Do(req)
		if err != nil {
			return nil, 0, fmt.Errorf("downloading archive: %w", err)
		}
		switch resp.StatusCode {
		case http.StatusOK:
			return resp.Body, resp.ContentLength, nil
		case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect,
			http.StatusPermanentRedirect:
			next, err := resp.Location()
			resp.Body.Close()
			if err != nil {
				return nil, 0, fmt.Errorf("downloading archive: redirect without a location: %w", err)
			}
			if next.Scheme != "https" && (next.Scheme != "http" || target.Scheme == "https") {
				return nil, 0, errors.New("downloading archive: redirect to a scheme other than https refused")
			}
			target = next
		default:
			resp.Body.Close()
			return nil, 0, fmt.Errorf("downloading archive: provider answered %d", resp.StatusCode)
		}
	}
	return nil, 0, fmt.Errorf("downloading archive: more than %d redirects", maxArchiveRedirects)
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

// ProviderTag is a tag of a repository and the commit it names.
type ProviderTag struct {
	Name      string
	CommitSHA string
}

// maxTagPages bounds a repository's tag list (100 a page).
const maxTagPages = 50

// Tags lists every tag of a repository with the commit it names, every
// page of it; a repository with more than maxTagPages pages is an error
// rather than a silently partial list.
func (a *App) Tags(ctx context.Context, installationID int64, owner, name string) ([]ProviderTag, error) {
	if a == nil {
		return nil, ErrUnconfigured
	}
	c, _ := a.installationClient(installationID)
	var out []ProviderTag
	opt := &gh.ListOptions{PerPage: 100}
	for range maxTagPages {
		page, resp, err := c.Repositories.ListTags(ctx, owner, name, opt)
		if err != nil {
			return nil, fmt.Errorf("listing tags: %w", err)
		}
		for _, t := range page {
			out = append(out, ProviderTag{Name: t.GetName(), CommitSHA: t.GetCommit().GetSHA()})
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opt.Page = resp.NextPage
	}
	return nil, fmt.Errorf("repository lists more than %d pages of tags", maxTagPages)
}

// TagCommit resolves a tag as it is now: the object its ref names (the
// commit of a lightweight tag, the tag object of an annotated one) and the
// commit that is, peeling tag objects. ErrTagNotFound: the provider has no
// such tag, or it does not lead to a commit.
func (a *App) TagCommit(ctx context.Context, installationID int64, owner, name, tag string) (refSHA, commitSHA string, err error) {
	if a == nil {
		return "", "", ErrUnconfigured
	}
	c, _ := a.installationClient(installationID)
	ref, _, err := c.Git.GetRef(ctx, owner, name, "tags/"+tag)
	if err != nil {
		if isClientError(err) {
			return "", "", ErrTagNotFound
		}
		return "", "", fmt.Errorf("resolving tag: %w", err)
	}
	obj := ref.GetObject()
	refSHA = obj.GetSHA()
	// A tag of a tag is peeled again, a bounded number of times.
	for range 4 {
		if obj.GetType() != "tag" {
			break
		}
		t, _, err := c.Git.GetTag(ctx, owner, name, obj.GetSHA())
		if err != nil {
			if isClientError(err) {
				return "", "", ErrTagNotFound
			}
			return "", "", fmt.Errorf("peeling tag: %w", err)
		}
		obj = t.GetObject()
	}
	if obj.GetType() != "commit" {
		return "", "", ErrTagNotFound
	}
	return refSHA, obj.GetSHA(), nil
}
