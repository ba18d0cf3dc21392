package v1_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/cairnhq/cairn/api/apitest"
	"github.com/cairnhq/cairn/api/assembly"
	"github.com/cairnhq/cairn/api/server"
)

var update = flag.Bool("update", false, "rewrite contracts/openapi.json from the code")

func contractPath(t *testing.T) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate test file")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "contracts", "openapi.json")
}

// generatedSpec builds a fresh server (no database needed) and renders its
// contract.
func generatedSpec(t *testing.T) []byte {
	t.Helper()
	deps, err := assembly.Assemble(apitest.TestConfig(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(deps)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := srv.V1.Spec()
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func TestContractIsCommitted(t *testing.T) {
	doc := generatedSpec(t)
	path := contractPath(t)
	if *update {
		if err := os.WriteFile(path, doc, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	committed, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading committed contract: %v (run `make contract`)", err)
	}
	if !bytes.Equal(committed, doc) {
		t.Fatalf("contracts/openapi.json differs from the code's contract; run `make contract` and commit the result")
	}
}

func TestContractIsReproducible(t *testing.T) {
	t.Parallel()
	if a, b := generatedSpec(t), generatedSpec(t); !bytes.Equal(a, b) {
		t.Fatal("two generations of the contract differ")
	}
}

func TestContractIsValidOpenAPI(t *testing.T) {
	t.Parallel()
	doc := generatedSpec(t)
	loader := openapi3.NewLoader()
	spec, err := loader.LoadFromData(doc)
	if err != nil {
		t.Fatalf("loading contract: %v", err)
	}
	if spec.OpenAPI != "3.1.0" {
		t.Fatalf("openapi version %q, want 3.1.0", spec.OpenAPI)
	}
	if err := spec.Validate(context.Background()); err != nil {
		t.Fatalf("contract does not validate: %v", err)
	}
}

func TestContractServedIsCommitted(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, nil, "")
	resp := env.Anonymous().Get("/v1/openapi.json")
	committed, err := os.ReadFile(contractPath(t))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 200 || !bytes.Equal(resp.Body, committed) {
		t.Fatalf("served contract (status %d, %d bytes) differs from the committed one (%d bytes)", resp.Status, len(resp.Body), len(committed))
	}
}
