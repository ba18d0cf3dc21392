package github

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	gh "github.com/google/go-github/v66/github"
)

// maxInstallerPages bounds the read of the installer's installations (100
// a page).
const maxInstallerPages = 10

// InstallerSees exchanges the installer's single-use authorization code
// and reports whether that person can see the installation. The user token
// is used for these reads only and never stored.
func (a *App) InstallerSees(ctx context.Context, code string, installationID int64) error {
	if a == nil || a.clientID == "" || a.clientSecret == "" {
		return ErrUnconfigured
	}
	if code == "" {
		return ErrInstallerUnverified
	}
	token, err := a.exchangeCode(ctx, code)
	if err != nil {
		return err
	}
	c := gh.NewClient(&http.Client{Transport: a.transport, Timeout: time.Minute}).WithAuthToken(token)
	c.BaseURL, _ = url.Parse(a.apiURL + "/")
	opts := &gh.ListOptions{PerPage: 100}
	for range maxInstallerPages {
		list, resp, err := c.Apps.ListUserInstallations(ctx, opts)
		if err != nil {
			return fmt.Errorf("reading the installer's installations: %w", err)
		}
		for _, in := range list {
			if in.GetID() == installationID {
				return nil
			}
		}
		if resp.NextPage == 0 {
			return ErrInstallerUnverified
		}
		opts.Page = resp.NextPage
	}
	return ErrInstallerUnverified
}

// exchangeCode trades the code for a user token at the host's OAuth
// endpoint. A refused code is the installer's problem (unverified); a
// failing host is an outage.
func (a *App) exchangeCode(ctx context.Context, code string) (string, error) {
	form := url.Values{"client_id": {a.clientID}, "client_secret": {a.clientSecret}, "code": {code}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.webURL()+"/login/oauth/access_token",
		strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := (&http.Client{Transport: a.transport, Timeout: time.Minute}).Do(req)
	if err != nil {
		return "", fmt.Errorf("exchanging the installer's code: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("exchanging the installer's code: status %d", resp.StatusCode)
	}
	var out struct {
		AccessToken string `json:"access_token"`
		Error       string `json:"error"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&out); err != nil {
		return "", fmt.Errorf("decoding the code exchange: %w", err)
	}
	if out.AccessToken == "" {
		// bad_verification_code and the like: the code is not this app's
		// or was used already.
		return "", ErrInstallerUnverified
	}
	return out.AccessToken, nil
}
