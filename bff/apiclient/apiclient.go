package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"github.com/cairnhq/cairn/api/platform/clientaddr"
)

// SessionCookie is the API's session cookie.
const SessionCookie = "__Secure-identity.session_token"

// maxBody bounds a page-rendering response; listing endpoints stay far
// below it and nothing larger is rendered server-side.
const maxBody = 8 << 20

// Client calls the API.
type Client struct {
	base *url.URL
	http *http.Client
	// vouchKey vouches for the browser's address (clientaddr.VouchKey).
	vouchKey []byte
}

// New returns a client of the API at base. The http client must not follow
// redirects. vouchKey (clientaddr.VouchKey) lets CallFor vouch for a
// browser's address; nil vouches for none.
func New(base *url.URL, hc *http.Client, vouchKey []byte) *Client {
	return &Client{base: base, http: hc, vouchKey: vouchKey}
}

// Error is a failed API call as the page shows it.
type Error struct {
	Status     int
	Code       string
	RequestID  string
	RetryAfter string
	// Unreachable is set when no answer came at all.
	Unreachable bool
}

func (e *Error) Error() string {
	if e.Unreachable {
		return "API unreachable"
	}
	return fmt.Sprintf("API answered %d %s (request %s)", e.Status, e.Code, e.RequestID)
}

// Page is a list's data and its next cursor.
type Page[T any] struct {
	Data       []T
	NextCursor string
}

// Call performs a request with the API session token and decodes the
// envelope's data into out (nil: ignored).
func (c *Client) Call(ctx context.Context, token, method, path string, body any, out any) error {
	_, err := c.call(ctx, token, method, path, body, out, nil)
	return err
}

// CallFor is Call made on behalf of the browser at client. The API
// throttles sign-in and sign-up per client address: the dashboard vouches
// for the browser's address with a MAC under the key it shares with the
// API, so a stranger guessing through the dashboard never slows everyone
// who signs in through it. X-Forwarded-For says the same to an API that
// lists the dashboard in CAIRN_TRUSTED_PROXIES and vouches differ (another
// AUTH_SECRET).
func (c *Client) CallFor(ctx context.Context, client netip.Addr, token, method, path string, body any, out any) error {
	if !client.IsValid() {
		return c.Call(ctx, token, method, path, body, out)
	}
	header := []string{"X-Forwarded-For", client.String()}
	if len(c.vouchKey) > 0 {
		header = append(header, clientaddr.VouchHeader, clientaddr.Vouch(c.vouchKey, client, time.Now()))
	}
	_, err := c.call(ctx, token, method, path, body, out, nil, header...)
	return err
}

// CodeOf returns the API's error code of a failed call, or "".
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// List is Call for a cursor list.
func List[T any](ctx context.Context, c *Client, token, path string) (Page[T], error) {
	var page Page[T]
	var meta struct {
		Page struct {
			NextCursor *string `json:"next_cursor"`
		} `json:"page"`
	}
	_, err := c.call(ctx, token, http.MethodGet, path, nil, &page.Data, &meta)
	if meta.Page.NextCursor != nil {
		page.NextCursor = *meta.Page.NextCursor
	}
	return page, err
}

// Mutate is Call with an idempotency key.
func (c *Client) Mutate(ctx context.Context, token, method, path, key string, body any, out any) error {
	_, err := c.call(ctx, token, method, path, body, out, nil, "Idempotency-Key", key)
	return err
}

func (c *Client) call(ctx context.Context, token, method, path string, body, out, meta any, header ...string) (int, error) {
	var reader io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		reader = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, reader)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.AddCookie(&http.Cookie{Name: SessionCookie, Value: token})
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, &Error{Unreachable: true, Status: http.StatusBadGateway}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil || len(raw) > maxBody {
		return resp.StatusCode, &Error{Status: http.StatusBadGateway, Code: "UPSTREAM_RESPONSE_INVALID", RequestID: resp.Header.Get("X-Request-Id")}
	}
	if resp.StatusCode >= 300 {
		var env struct {
			Error struct {
				Code      string `json:"code"`
				RequestID string `json:"request_id"`
			} `json:"error"`
		}
		_ = json.Unmarshal(raw, &env)
		id := env.Error.RequestID
		if id == "" {
			id = resp.Header.Get("X-Request-Id")
		}
		return resp.StatusCode, &Error{Status: resp.StatusCode, Code: env.Error.Code, RequestID: id, RetryAfter: resp.Header.Get("Retry-After")}
	}
	if out == nil && meta == nil {
		return resp.StatusCode, nil
	}
	var env struct {
		Data json.RawMessage `json:"data"`
		Meta json.RawMessage `json:"meta"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return resp.StatusCode, &Error{Status: http.StatusBadGateway, Code: "UPSTREAM_RESPONSE_INVALID", RequestID: resp.Header.Get("X-Request-Id")}
	}
	if out != nil && len(env.Data) > 0 {
		if err := json.Unmarshal(env.Data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decoding %s %s: %w", method, path, err)
		}
	}
	if meta != nil && len(env.Meta) > 0 {
		_ = json.Unmarshal(env.Meta, meta)
	}
	return resp.StatusCode, nil
}

// StatusOf returns the HTTP status an error should render with.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return http.StatusInternalServerError
}
