package httpx

import (
	"net/http"
	"strconv"
)

// Problem is the public face of an error: a status and a stable code. Nothing
// else about an error ever reaches a client.
type Problem struct {
	Status int
	Code   string
	// RetryAfter, when positive, is sent as Retry-After seconds.
	RetryAfter int
}

// Codes used across surfaces. Domain-specific codes live with their mapping.
const (
	CodeValidationFailed     = "VALIDATION_FAILED"
	CodePayloadTooLarge      = "PAYLOAD_TOO_LARGE"
	CodeNotFound             = "NOT_FOUND"
	CodeUnauthenticated      = "UNAUTHENTICATED"
	CodeForbidden            = "FORBIDDEN"
	CodeMethodNotAllowed     = "METHOD_NOT_ALLOWED"
	CodeUnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE"
	CodeNotAcceptable        = "NOT_ACCEPTABLE"
	CodeUnavailable          = "UNAVAILABLE"
	CodeServiceUnavailable   = "service_unavailable"
	CodeInternal             = "INTERNAL"
	CodeTimeout              = "REQUEST_TIMEOUT"
)

// AdmissionRetryAfterSeconds is the Retry-After of a closed launch gate.
const AdmissionRetryAfterSeconds = 60

// ErrorObject is the bounded error object: status, code and request ID only.
type ErrorObject struct {
	Status    int    `json:"status" doc:"HTTP status of the response."`
	Code      string `json:"code" doc:"Stable machine-readable error code."`
	RequestID string `json:"request_id" doc:"ID of the failed request."`
}

// ErrorBody is every /v1 error response. It implements huma's StatusError
// and HeadersError so handlers can return it directly.
type ErrorBody struct {
	Object ErrorObject `json:"error"`
	Meta   Meta        `json:"meta"`

	retryAfter int
}

// NewErrorBody renders a problem; the request ID is stamped on the way out.
func NewErrorBody(p Problem) *ErrorBody {
	return &ErrorBody{Object: ErrorObject{Status: p.Status, Code: p.Code}, retryAfter: p.RetryAfter}
}

// GetStatus implements huma.StatusError.
func (e *ErrorBody) GetStatus() int { return e.Object.Status }

// Error implements error with the code only: never a cause.
func (e *ErrorBody) Error() string { return strconv.Itoa(e.Object.Status) + " " + e.Object.Code }

// GetHeaders implements huma.HeadersError.
func (e *ErrorBody) GetHeaders() http.Header {
	h := http.Header{}
	if e.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.retryAfter))
		h.Set("Cache-Control", "private, no-store")
	}
	return h
}

// ProblemForStatus gives the code of an error the framework raised on its own
// (unknown route, unparseable body, validation) from its status alone.
func ProblemForStatus(status int) Problem {
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return Problem{Status: http.StatusBadRequest, Code: CodeValidationFailed}
	case http.StatusRequestEntityTooLarge:
		return Problem{Status: status, Code: CodePayloadTooLarge}
	case http.StatusNotFound:
		return Problem{Status: status, Code: CodeNotFound}
	case http.StatusMethodNotAllowed:
		return Problem{Status: status, Code: CodeMethodNotAllowed}
	case http.StatusUnsupportedMediaType:
		return Problem{Status: status, Code: CodeUnsupportedMediaType}
	case http.StatusNotAcceptable:
		return Problem{Status: status, Code: CodeNotAcceptable}
	case http.StatusUnauthorized:
		return Problem{Status: status, Code: CodeUnauthenticated}
	case http.StatusForbidden:
		return Problem{Status: status, Code: CodeForbidden}
	case http.StatusRequestTimeout:
		return Problem{Status: status, Code: CodeTimeout}
	case http.StatusServiceUnavailable:
		return Problem{Status: status, Code: CodeUnavailable}
	default:
		return Problem{Status: http.StatusInternalServerError, Code: CodeInternal}
	}
}
