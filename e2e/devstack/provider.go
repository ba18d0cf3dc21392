package devstack

import (
	"archive/zip"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"golang.org/x/mod/sumdb/dirhash"

	"github.com/cairnhq/cairn/jobs/sandbox"
)

// NullProvider is the provider go-tfe's run fixtures use (hashicorp/null).
// Its only version the module proxy serves is 1.0.0, published before the
// provider had a go.mod: its packages import themselves as
// github.com/terraform-providers/terraform-provider-null and it builds
// against the Terraform 0.12 plugin SDK, which speaks plugin protocol 5 as
// OpenTofu expects. providerbuild/ pins that graph (go.mod and go.sum).
const (
	NullProviderSource  = "registry.opentofu.org/hashicorp/null"
	NullProviderVersion = "1.0.0"
	nullProviderPackage = "github.com/terraform-providers/terraform-provider-null"
)

//go:embed providerbuild/go.mod.txt
var providerBuildMod []byte

//go:embed providerbuild/go.sum.txt
var providerBuildSum []byte

// ProviderMirrorDir is the filesystem provider mirror under root that tests
// and benchmarks hand to sandboxes as CAIRN_PROVIDER_MIRROR.
func ProviderMirrorDir(root string) string {
	return filepath.Join(root, ".tools", "providers")
}

// EnsureProviderMirror builds hashicorp/null from its Go module, once, into
// the provider mirror under root in OpenTofu's packed layout
// (<host>/<namespace>/<type>/terraform-provider-<type>_<version>_<os>_<arch>.zip),
// and returns the mirror's directory.
func EnsureProviderMirror(ctx context.Context, root string, log io.Writer) (string, error) {
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return "", err
	}
	mirror := ProviderMirrorDir(absRoot)
	platform := runtime.GOOS + "_" + runtime.GOARCH
	zipName := fmt.Sprintf("terraform-provider-null_%s_%s.zip", NullProviderVersion, platform)
	pkg := filepath.Join(mirror, filepath.FromSlash(NullProviderSource), zipName)
	index := filepath.Join(filepath.Dir(pkg), NullProviderVersion+".json")
	if _, err := os.Stat(index); err == nil {
		return mirror, nil
	}
	if _, err := os.Stat(pkg); err == nil {
		return mirror, writeVersionIndex(pkg, index, platform)
	}
	fmt.Fprintf(log, "==> building provider hashicorp/null %s from its Go module (a few minutes the first time)\n", NullProviderVersion)
	tmp, err := os.MkdirTemp("", "cairn-provider-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := os.WriteFile(filepath.Join(tmp, "go.mod"), providerBuildMod, 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, "go.sum"), providerBuildSum, 0o644); err != nil {
		return "", err
	}
	exe := "terraform-provider-null_v" + NullProviderVersion
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(tmp, exe), nullProviderPackage)
	build.Dir = tmp
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	build.Stdout, build.Stderr = log, log
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("building hashicorp/null: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(pkg), 0o755); err != nil {
		return "", err
	}
	if err := zipExecutable(filepath.Join(tmp, exe), pkg+".tmp"); err != nil {
		return "", err
	}
	if err := os.Rename(pkg+".tmp", pkg); err != nil {
		return "", err
	}
	return mirror, writeVersionIndex(pkg, index, platform)
}

// writeVersionIndex publishes the package's checksums as `tofu providers
// mirror` does: <version>.json naming the platform's zip with its h1:
// (contents) and zh: (zip) hashes, and index.json listing the version.
func writeVersionIndex(pkg, index, platform string) error {
	h1, err := dirhash.HashZip(pkg, dirhash.Hash1)
	if err != nil {
		return err
	}
	zh, err := sandbox.FileSHA256(pkg)
	if err != nil {
		return err
	}
	doc := map[string]any{"archives": map[string]any{platform: map[string]any{
		"url": filepath.Base(pkg), "hashes": []string{h1, "zh:" + zh}}}}
	body, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	versions, err := json.Marshal(map[string]any{"versions": map[string]any{NullProviderVersion: map[string]any{}}})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(index), "index.json"), versions, 0o644); err != nil {
		return err
	}
	return os.WriteFile(index, body, 0o644)
}

// zipExecutable packs one executable as a provider package: a zip holding
// the binary at its root with its executable bit.
func zipExecutable(path, dest string) (err error) {
	src, err := os.Open(path)
	if err != nil {
		return err
	}
	defer src.Close()
	out, err := os.Create(dest)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	zw := zip.NewWriter(out)
	hdr := &zip.FileHeader{Name: filepath.Base(path), Method: zip.Deflate}
	hdr.SetMode(0o755)
	w, err := zw.CreateHeader(hdr)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, src); err != nil {
		return err
	}
	return zw.Close()
}
