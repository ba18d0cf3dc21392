package apiclient

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
)

// Stream performs a request whose body and answer are streamed: an upload
// of unknown length, or a download the caller copies to the browser. A
// success returns the open response (the caller closes it); a failure is an
// *Error, read from a bounded error body.
func (c *Client) Stream(ctx context.Context, token, method, path, contentType string, body io.Reader, header ...string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, body)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.AddCookie(&http.Cookie{Name: SessionCookie, Value: token})
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, &Error{Unreachable: true, Status: http.StatusBadGateway}
	}
	if resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	var env struct {
		Error struct {
			Code      string `json:"code"`
			RequestID string `json:"request_id"`
		} `json:"error"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&env)
	id := env.Error.RequestID
	if id == "" {
		id = resp.Header.Get("X-Request-Id")
	}
	return nil, &Error{Status: resp.StatusCode, Code: env.Error.Code, RequestID: id, RetryAfter: resp.Header.Get("Retry-After")}
}
