package oauth

import (
	"errors"
	"net/http"
)

// Error is an OAuth protocol error: its code is what RFC 6749 §5.2,
// RFC 7591 §3.2.2 or RFC 8707 name, and it is answered as such to the
// client. The description is fixed text of ours, never a cause.
type Error struct {
	Code        string
	Description string
	Status      int
}

func (e *Error) Error() string { return e.Code + ": " + e.Description }

// Is matches errors of the same code, so callers test with errors.Is.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code
}

func protocolError(status int, code, description string) *Error {
	return &Error{Code: code, Description: description, Status: status}
}

// The protocol errors, by code. Each use names its own description.
var (
	ErrInvalidRequest        = protocolError(http.StatusBadRequest, "invalid_request", "")
	ErrInvalidClient         = protocolError(http.StatusUnauthorized, "invalid_client", "")
	ErrInvalidGrant          = protocolError(http.StatusBadRequest, "invalid_grant", "")
	ErrUnauthorizedClient    = protocolError(http.StatusBadRequest, "unauthorized_client", "")
	ErrUnsupportedGrantType  = protocolError(http.StatusBadRequest, "unsupported_grant_type", "")
	ErrUnsupportedResponse   = protocolError(http.StatusBadRequest, "unsupported_response_type", "")
	ErrInvalidScope          = protocolError(http.StatusBadRequest, "invalid_scope", "")
	ErrInvalidTarget         = protocolError(http.StatusBadRequest, "invalid_target", "")
	ErrAccessDenied          = protocolError(http.StatusForbidden, "access_denied", "")
	ErrInvalidRedirectURI    = protocolError(http.StatusBadRequest, "invalid_redirect_uri", "")
	ErrInvalidClientMetadata = protocolError(http.StatusBadRequest, "invalid_client_metadata", "")
)

// describe returns a protocol error of kind's code with a description.
func describe(kind *Error, description string) *Error {
	return &Error{Code: kind.Code, Description: description, Status: kind.Status}
}

// ErrInvalidToken means an access token is unknown, malformed, expired,
// revoked, for another audience or issuer, or its grant ended. Every one
// of these is the same 401.
var ErrInvalidToken = errors.New("invalid access token")

// ErrInsufficientScope means a valid access token lacks a scope the
// request needs (403 with an insufficient_scope challenge).
var ErrInsufficientScope = errors.New("insufficient scope")

// ErrRequestExpired means a signed authorization request outlived its
// window: the person took too long, and the client must start again.
var ErrRequestExpired = errors.New("authorization request expired")

// RedirectError is an authorization error reported to the client at its
// redirect URI (RFC 6749 §4.1.2.1): the client and redirect URI were valid,
// the rest of the request was not.
type RedirectError struct {
	Err         *Error
	RedirectURI string
	State       string
}

func (e *RedirectError) Error() string { return e.Err.Error() }

func (e *RedirectError) Unwrap() error { return e.Err }
