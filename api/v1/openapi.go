package v1

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
)

// Spec returns the OpenAPI 3.1 document of every registered operation. It is
// generated once, after registration, and is byte-for-byte what
// contracts/openapi.json must hold.
func (a *API) Spec() ([]byte, error) {
	a.specOnce.Do(func() {
		doc, err := json.MarshalIndent(a.huma.OpenAPI(), "", "  ")
		if err != nil {
			a.specErr = fmt.Errorf("rendering openapi document: %w", err)
			return
		}
		a.specBytes = append(doc, '\n')
	})
	return a.specBytes, a.specErr
}

type specOutput struct {
	ContentType string `header:"Content-Type"`
	Body        []byte
}

func (a *API) registerSpec() {
	register(a, huma.Operation{
		OperationID: "get-openapi",
		Method:      http.MethodGet,
		Path:        "/v1/openapi.json",
		Summary:     "The OpenAPI 3.1 document of this API",
		Tags:        []string{"Meta"},
		Responses: map[string]*huma.Response{"200": {
			Description: "The contract, identical to contracts/openapi.json of this build.",
			Content:     map[string]*huma.MediaType{"application/json": {Schema: &huma.Schema{Type: "object"}}},
		}},
	}, operationOptions{public: true}, func(ctx context.Context, _ *struct{}) (*specOutput, error) {
		doc, err := a.Spec()
		if err != nil {
			return nil, a.fail(ctx, err)
		}
		return &specOutput{ContentType: "application/json", Body: doc}, nil
	})
}
