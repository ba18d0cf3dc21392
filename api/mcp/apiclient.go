package mcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
)

// responseLimit bounds what a tool reads back from /v1 (plan changes and
// log pages are the largest answers).
const responseLimit = 8 << 20

// apiClient calls /v1 with the caller's own token.
type apiClient struct {
	base   string
	client *http.Client
	logger *slog.Logger
}

// call is one /v1 request. body is JSON unless contentType says otherwise
// (and is then raw bytes).
type call struct {
	method      string
	path        string
	query       url.Values
	body        any
	contentType string
	// key is the idempotency key of a mutation ("" on reads).
	key string
}

// apiError is a /v1 refusal as a tool reports it: enough for an agent to
// decide what to do next (the code), and the request ID for a person.
type apiError struct {
	Status    int
	Code      string
	Message   string
	RequestID string
}

func (e *apiError) Error() string {
	msg := fmt.Sprintf("cairn refused the request: %d %s", e.Status, e.Code)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.RequestID != "" {
		msg += " (request " + e.RequestID + ")"
	}
	return msg
}

// do performs the call and returns the decoded /v1 envelope.
func (a *apiClient) do(ctx context.Context, token string, c call) (map[string]any, error) {
	u := a.base + c.path
	if len(c.query) > 0 {
		u += "?" + c.query.Encode()
	}
	var body io.Reader
	contentType := c.contentType
	switch b := c.body.(type) {
	case nil:
	case []byte:
		body = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return nil, fmt.Errorf("encoding request: %w", err)
		}
		body, contentType = bytes.NewReader(raw), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, c.method, u, body)
	if err != nil {
		return nil, fmt.Errorf("building request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.key != "" {
		req.Header.Set("Idempotency-Key", c.key)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		// The cause names the API's internal address and the query the
		// agent sent: neither is logged, and the agent sees only that the
		// call did not get through.
		a.logger.WarnContext(ctx, "calling cairn-api failed", "method", c.method, "path", c.path)
		return nil, errors.New("cairn is unreachable; try again later")
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, responseLimit+1))
	if err != nil {
		return nil, fmt.Errorf("reading cairn's answer: %w", err)
	}
	if len(raw) > responseLimit {
		return nil, fmt.Errorf("cairn's answer is larger than %d bytes", responseLimit)
	}
	if resp.StatusCode >= 300 {
		// The error object of /v1's httpx.ErrorBody (not imported: it
		// would link fiber into this binary); meta repeats its request ID.
		var problem struct {
			Error struct {
				Code      string `json:"code"`
				RequestID string `json:"request_id"`
			} `json:"error"`
		}
		_ = json.Unmarshal(raw, &problem)
		e := &apiError{Status: resp.StatusCode, Code: problem.Error.Code, Message: hint(resp.StatusCode), RequestID: problem.Error.RequestID}
		if e.RequestID == "" {
			e.RequestID = resp.Header.Get("X-Request-Id")
		}
		return nil, e
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("cairn's answer is not JSON: %w", err)
	}
	return out, nil
}

// newKey is an idempotency key for a mutation the agent gave none for.
func newKey() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "mcp-" + hex.EncodeToString(b), nil
}

// hint says what a refusal means for an agent.
func hint(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "the access token is no longer valid; authorize again"
	case http.StatusForbidden:
		return "not permitted for this agent (approving is a person's decision; mutations need the mcp:write scope)"
	case http.StatusNotFound:
		return "no such resource in this organization"
	case http.StatusConflict:
		return "the resource changed; read it again before retrying"
	case http.StatusTooManyRequests:
		return "slow down and retry later"
	}
	return ""
}
