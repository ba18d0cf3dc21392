package v1

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/cairnhq/cairn/api/platform/httpx"
)

// EchoPath is the test-only operation RegisterEcho mounts.
const EchoPath = "/v1/test-echo"

// EchoBody is what the echo operation decodes: the field shapes /v1
// request bodies use.
type EchoBody struct {
	Name   string            `json:"name" minLength:"1" maxLength:"200"`
	Count  *int              `json:"count,omitempty" minimum:"0" maximum:"1000"`
	Tags   []string          `json:"tags,omitempty" maxItems:"16"`
	Labels map[string]string `json:"labels,omitempty"`
}

type echoInput struct {
	IdempotencyHeader
	Query string `query:"q" maxLength:"256"`
	Body  EchoBody
}

// EchoView is what the echo operation answers: the decoded body and query.
type EchoView struct {
	Body  EchoBody `json:"body"`
	Query string   `json:"query"`
}

// RegisterEcho mounts a public operation that answers with what it
// decoded, under Cairn's conventions and the given body limit, so fuzz
// targets reach the body path every /v1 operation shares without a
// database.
func RegisterEcho(a *API, limit int64) {
	register(a, huma.Operation{OperationID: "test-echo", Method: http.MethodPost, Path: EchoPath},
		operationOptions{public: true, bodyLimit: limit, mutation: true, admit: notAdmitted},
		func(_ context.Context, in *echoInput) (*Single[EchoView], error) {
			return &Single[EchoView]{Body: httpx.Envelope[EchoView]{Data: EchoView{Body: in.Body, Query: in.Query}}}, nil
		})
}
