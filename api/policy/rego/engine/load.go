package engine

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/loader/filter"
	opa "github.com/open-policy-agent/opa/v1/rego"

	"github.com/cairnhq/cairn/api/policy/rego"
)

// maxBundleExpandedBytes bounds a bundle's uncompressed size. Build writes
// at most MaxSourceBytes of modules plus a small manifest and at most 1 KiB
// of tar header and padding per file; anything larger was not produced by
// Build, and without a bound a small gzip stream could expand without
// limit in memory.
const maxBundleExpandedBytes = rego.MaxSourceBytes + 4<<20

// Policy is a compiled bundle with its entrypoint query prepared once.
// It is safe for concurrent use.
type Policy struct {
	query opa.PreparedEvalQuery
}

// Load reads a bundle written by Build (at most MaxBundleBytes), compiles
// its modules again as Rego v1 in strict mode against the capabilities
// manifest, and prepares the entrypoint query. The bundle is not trusted
// to have been built under the current manifest: recompiling is what
// enforces it. Any failure is an *EvalError with CodeEvaluatorFailed,
// except a cancelled ctx.
func Load(ctx context.Context, r io.Reader) (*Policy, error) {
	caps, _, err := Capabilities()
	if err != nil {
		return nil, evalErr(rego.CodeEvaluatorFailed, err.Error())
	}
	loader, err := readBundleArchive(r)
	if err != nil {
		return nil, evalErr(rego.CodeEvaluatorFailed, "reading bundle: "+err.Error())
	}
	b, err := bundle.NewCustomReader(loader).
		WithRegoVersion(ast.RegoV1).
		WithCapabilities(caps).
		WithProcessAnnotations(true).
		WithSkipBundleVerification(true). // integrity is the digest the caller checks
		WithSizeLimitBytes(rego.MaxSourceBytes).
		Read()
	if err != nil {
		return nil, evalErr(rego.CodeEvaluatorFailed, "reading bundle: "+err.Error())
	}
	if err := checkBundleShape(&b); err != nil {
		return nil, evalErr(rego.CodeEvaluatorFailed, err.Error())
	}

	modules := make(map[string]*ast.Module, len(b.Modules))
	for _, m := range b.Modules {
		modules[m.Path] = m.Parsed
	}
	compiler := newCompiler(caps)
	if compiler.Compile(modules); compiler.Failed() {
		return nil, evalErr(rego.CodeEvaluatorFailed, "compiling bundle: "+compiler.Errors.Error())
	}
	if err := checkEntrypoint(compiler); err != nil {
		return nil, evalErr(rego.CodeEvaluatorFailed, err.Error())
	}
	query, err := opa.New(
		opa.Compiler(compiler),
		opa.Query(rego.Entrypoint),
		opa.StrictBuiltinErrors(true),
	).PrepareForEval(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("preparing policy: %w", ctx.Err())
		}
		return nil, evalErr(rego.CodeEvaluatorFailed, "preparing query: "+err.Error())
	}
	return &Policy{query: query}, nil
}

// checkBundleShape refuses anything Build would not have written: data,
// Wasm or plan modules, a Rego version other than v1 (globally or for a
// single file), too many modules.
func checkBundleShape(b *bundle.Bundle) error {
	if b.Manifest.RegoVersion == nil || *b.Manifest.RegoVersion != 1 {
		return errors.New("bundle manifest does not declare rego_version 1")
	}
	if len(b.Manifest.FileRegoVersions) > 0 {
		return errors.New("bundle manifest overrides the Rego version of files")
	}
	if len(b.Data) > 0 {
		return errors.New("bundle carries data")
	}
	if len(b.WasmModules) > 0 || len(b.Wasm) > 0 || len(b.PlanModules) > 0 {
		return errors.New("bundle carries compiled modules")
	}
	if len(b.Modules) == 0 || len(b.Modules) > rego.MaxModules {
		return fmt.Errorf("bundle has %d modules, want 1 to %d", len(b.Modules), rego.MaxModules)
	}
	return nil
}

// archiveLoader hands OPA's bundle reader the files of a tar.gz read with
// bounds. OPA's own tarball loader bounds each file but neither their
// number nor their total, so a small compressed stream could exhaust
// memory.
type archiveLoader struct {
	files []*bundle.Descriptor
	next  int
}

func readBundleArchive(r io.Reader) (*archiveLoader, error) {
	zr, err := gzip.NewReader(newBoundedReader(r, rego.MaxBundleBytes))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	tr := tar.NewReader(newBoundedReader(zr, maxBundleExpandedBytes))
	l := &archiveLoader{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return l, nil
		}
		if err != nil {
			return nil, err
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg:
		default:
			return nil, fmt.Errorf("%s: not a regular file", hdr.Name)
		}
		// Modules, data.json and .manifest: anything past that many files
		// is not a bundle Build wrote.
		if len(l.files) > rego.MaxModules+2 {
			return nil, fmt.Errorf("more than %d files", rego.MaxModules+2)
		}
		var buf bytes.Buffer
		if _, err := io.Copy(&buf, tr); err != nil {
			return nil, err
		}
		name := path.Clean("/" + strings.TrimPrefix(hdr.Name, "/"))
		l.files = append(l.files, bundle.NewDescriptor(name, name, &buf))
	}
}

func (l *archiveLoader) NextFile() (*bundle.Descriptor, error) {
	if l.next >= len(l.files) {
		return nil, io.EOF
	}
	l.next++
	return l.files[l.next-1], nil
}

// The options OPA's reader may set are fixed by readBundleArchive: every
// file is read, sizes are bounded there, and there are no links.

func (l *archiveLoader) WithFilter(filter.LoaderFilter) bundle.DirectoryLoader { return l }

func (l *archiveLoader) WithPathFormat(bundle.PathFormat) bundle.DirectoryLoader { return l }

func (l *archiveLoader) WithSizeLimitBytes(int64) bundle.DirectoryLoader { return l }

func (l *archiveLoader) WithFollowSymlinks(bool) bundle.DirectoryLoader { return l }
