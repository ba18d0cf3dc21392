package httpx

// Meta is the request metadata every /v1 response carries.
type Meta struct {
	RequestID string `json:"request_id" doc:"ID of this request, also sent as X-Request-Id."`
}

// Envelope is the shape of every successful single-object response.
type Envelope[T any] struct {
	Data T    `json:"data"`
	Meta Meta `json:"meta"`
}

// PageMeta carries the cursor of the next page, or null on the last page.
// There is deliberately no has_more flag and no per-record cursor.
type PageMeta struct {
	NextCursor *string `json:"next_cursor" doc:"Opaque cursor for the next page; null on the last page."`
}

// ListMeta is the metadata of a cursor-backed list.
type ListMeta struct {
	RequestID string   `json:"request_id" doc:"ID of this request, also sent as X-Request-Id."`
	Page      PageMeta `json:"page"`
}

// ListEnvelope is the shape of every cursor-backed list response.
type ListEnvelope[T any] struct {
	Data []T      `json:"data"`
	Meta ListMeta `json:"meta"`
}

// requestStamped is implemented by every response body that repeats the
// request ID, so one response transformer can fill it in for all of them and
// no handler has to remember to.
type requestStamped interface {
	withRequestID(id string) any
}

func (e Envelope[T]) withRequestID(id string) any {
	e.Meta.RequestID = id
	return e
}

func (e ListEnvelope[T]) withRequestID(id string) any {
	e.Meta.RequestID = id
	if e.Data == nil {
		e.Data = []T{}
	}
	return e
}

func (e *ErrorBody) withRequestID(id string) any {
	stamped := *e
	stamped.Object.RequestID = id
	stamped.Meta.RequestID = id
	return &stamped
}

// Stamp returns body with the request ID filled in when the body is one of the
// enveloped shapes, and body unchanged otherwise.
func Stamp(body any, requestID string) any {
	if s, ok := body.(requestStamped); ok {
		return s.withRequestID(requestID)
	}
	return body
}
