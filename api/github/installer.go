package github

import (
	"context"
	"encoding/json"
	"errors"
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

// VerifyInstaller exchanges the installer's single-use authorization code
// and shows, with what that person's own token can read, that they may
// bind the installation: it is among the installations they can see, and
// they control its account: a personal account is the person themself
// (GET /user), an organization counts only when their own membership in it
// (GET /user/memberships/orgs/{org}) is active with the admin role, which is
// what installing an app on an organization takes. Merely seeing an
// installation (a member with access to one of its repositories) is not
// enough. It returns the verified account's ID, which the caller compares
// with the installation the app itself reads. The user token is used for
// these reads only and never stored.
func (a *App) VerifyInstaller(ctx context.Context, code string, installationID int64) (int64, error) {
	if a == nil || a.clientID == "" || a.clientSecret == "" {
		return 0, ErrUnconfigured
	}
	if code == "" {
		return 0, ErrInstallerUnverified
	}
	token, err := a.exchangeCode(ctx, code)
	if err != nil {
		return 0, err
	}
	c := gh.NewClient(&http.Client{Transport: a.transport, Timeout: time.Minute}).WithAuthToken(token)
	c.BaseURL, _ = url.Parse(a.apiURL + "/")
	account, err := installationSeenBy(ctx, c, installationID)
	if err != nil {
		return 0, err
	}
	me, _, err := c.Users.Get(ctx, "")
	if err != nil {
		return 0, installerReadError("reading the installer", err)
	}
	switch {
	case me.GetID() <= 0 || account.GetID() <= 0:
		return 0, ErrInstallerUnverified
	case account.GetType() == "User":
		if me.GetID() != account.GetID() {
			return 0, ErrInstallerUnverified
		}
	case account.GetType() == "Organization":
		m, _, err := c.Organizations.GetOrgMembership(ctx, "", account.GetLogin())
		if err != nil {
			return 0, installerReadError("reading the installer's membership", err)
		}
		if m.GetState() != "active" || m.GetRole() != "admin" || m.GetOrganization().GetID() != account.GetID() ||
			m.GetUser().GetID() != me.GetID() {
			return 0, ErrInstallerUnverified
		}
	default:
		// An enterprise or any other account kind: nothing here shows
		// the person controls it.
		return 0, ErrInstallerUnverified
	}
	return account.GetID(), nil
}

// installationSeenBy finds the installation among those the token's
// person can see and returns its account.
func installationSeenBy(ctx context.Context, c *gh.Client, installationID int64) (*gh.User, error) {
	opts := &gh.ListOptions{PerPage: 100}
	for range maxInstallerPages {
		list, resp, err := c.Apps.ListUserInstallations(ctx, opts)
		if err != nil {
			return nil, installerReadError("reading the installer's installations", err)
		}
		for _, in := range list {
			if in.GetID() == installationID && in.GetAccount() != nil {
				return in.GetAccount(), nil
			}
		}
		if resp.NextPage == 0 {
			return nil, ErrInstallerUnverified
		}
		opts.Page = resp.NextPage
	}
	return nil, ErrInstallerUnverified
}

// installerReadError classifies a failed read with the installer's token:
// a refusal (not found, forbidden: not a member, the app blocked by the
// organization) leaves the person unverified; anything else is an outage.
func installerReadError(what string, err error) error {
	var re *gh.ErrorResponse
	if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode >= 400 && re.Response.StatusCode < 500 {
		return ErrInstallerUnverified
	}
	return fmt.Errorf("%s: %w", what, err)
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
