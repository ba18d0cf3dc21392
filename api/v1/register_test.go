package v1

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/gofiber/fiber/v2"
)

// TestRegisterRefusesAMutationWithoutAKey: a state-changing operation that
// is not declared a mutation, or whose input has no Idempotency-Key, stops
// the API from starting.
func TestRegisterRefusesAMutationWithoutAKey(t *testing.T) {
	t.Parallel()
	a := Mount(fiber.New(), Deps{})
	type keyless struct {
		Body struct {
			Name string `json:"name"`
		}
	}
	handler := func(context.Context, *keyless) (*struct{}, error) { return nil, nil }
	keyed := func(context.Context, *struct{ IdempotencyHeader }) (*struct{}, error) { return nil, nil }
	for name, tc := range map[string]func(){
		"POST not declared a mutation": func() {
			register(a, huma.Operation{OperationID: "sneaky", Method: http.MethodPost, Path: "/v1/sneaky"}, operationOptions{}, keyed)
		},
		"DELETE without a key": func() {
			register(a, huma.Operation{OperationID: "keyless", Method: http.MethodDelete, Path: "/v1/keyless"}, operationOptions{mutation: true}, handler)
		},
		"GET declared a mutation": func() {
			register(a, huma.Operation{OperationID: "confused", Method: http.MethodGet, Path: "/v1/confused"}, operationOptions{mutation: true}, keyed)
		},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "v1:") {
					t.Errorf("%s: registered (%v)", name, r)
				}
			}()
			tc()
		}()
	}
}
