package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRoutesFileMatchesContract is the drift check: CI fails when someone
// changes the contract without regenerating the proxy's allowlist, or edits
// the generated file by hand.
func TestRoutesFileMatchesContract(t *testing.T) {
	t.Parallel()
	contract, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "contracts", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := generate(contract)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", "routes_gen.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("bff/proxy/routes_gen.go is stale against contracts/openapi.json; run `go generate ./bff/proxy`\n--- want\n%s", want)
	}
}

func TestAllowedRoutes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		contract string
		want     []route
		wantErr  string
	}{
		{
			name: "sorted by path then method, non-v1 and credential paths left out",
			contract: `{"openapi":"3.1.0","paths":{
				"/v1/runs/{id}":{"get":{},"parameters":[]},
				"/v1/runs":{"post":{},"get":{}},
				"/healthz":{"get":{}},
				"/v1/user-tokens":{"post":{}},
				"/v1/user-tokens/{id}":{"delete":{}},
				"/v1/service-accounts/{id}/tokens":{"post":{}},
				"/v1/workspaces/{id}":{"patch":{},"options":{},"trace":{}}
			}}`,
			want: []route{
				{"GET", "/v1/runs"},
				{"POST", "/v1/runs"},
				{"GET", "/v1/runs/{id}"},
				{"PATCH", "/v1/workspaces/{id}"},
			},
		},
		{
			name:     "not OpenAPI 3.1",
			contract: `{"openapi":"3.0.3","paths":{"/v1/runs":{"get":{}}}}`,
			wantErr:  "want 3.1.x",
		},
		{
			name:     "referenced path item would hide its operations",
			contract: `{"openapi":"3.1.0","paths":{"/v1/runs":{"$ref":"#/components/pathItems/runs"}}}`,
			wantErr:  "unsupported path item member",
		},
		{
			name:     "parameter sharing a segment with a literal",
			contract: `{"openapi":"3.1.0","paths":{"/v1/runs/run-{id}":{"get":{}}}}`,
			wantErr:  "neither a plain literal",
		},
		{
			name:     "dot segment",
			contract: `{"openapi":"3.1.0","paths":{"/v1/runs/../x":{"get":{}}}}`,
			wantErr:  "dot segment",
		},
		{
			name:     "nothing under v1",
			contract: `{"openapi":"3.1.0","paths":{"/v1/user-tokens":{"post":{}}}}`,
			wantErr:  "no operations",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := allowedRoutes([]byte(tt.contract))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("routes = %v, want %v", got, tt.want)
			}
		})
	}
}
