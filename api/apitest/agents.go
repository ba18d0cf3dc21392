package apitest

import (
	"net/http"
	"net/url"
	"strings"
)

// Consent plays the person's part of an agent's authorization: the browser
// opens the client's authorization URL, the API sends it to the consent
// screen, and u (signed in) allows the request in u's active organization,
// granting scopes (nil: all requested). It returns the client's redirect
// URI with the code, state and issuer, as the browser would be sent there.
func (u *User) Consent(authorizeURL string, scopes []string) (*url.URL, error) {
	t := u.env.T
	t.Helper()
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(authorizeURL)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	consent, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusFound || !strings.HasSuffix(consent.Path, "/oauth/consent") {
		// An error the authorization server sends back to the client.
		return consent, nil
	}
	u.Get("/api/auth/oauth2/consent?"+consent.RawQuery).MustStatus(t, http.StatusOK)
	var answer struct {
		RedirectURI string `json:"redirect_uri"`
	}
	u.Do(Request{Method: http.MethodPost, Path: "/api/auth/oauth2/consent", Body: map[string]any{
		"query": consent.RawQuery, "organization_id": u.OrganizationID, "allow": true, "scopes": scopes,
	}}).MustStatus(t, http.StatusOK).Data(t, &answer)
	return url.Parse(answer.RedirectURI)
}
