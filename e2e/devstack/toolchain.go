package devstack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/cairnhq/cairn/jobs/sandbox"
)

// TofuModule is where OpenTofu's source is published as a Go module.
const TofuModule = "github.com/opentofu/opentofu"

// ToolchainDir is where the toolchain mirror keeps one tool version:
// .tools/toolchains/<tool>/<version>/ with the binary and a SHA256SUMS file.
func ToolchainDir(root, tool, version string) string {
	return filepath.Join(root, ".tools", "toolchains", tool, version)
}

// EnsureTofu builds OpenTofu version from its published Go module into the
// toolchain mirror under root, once, and writes its checksum. `go install`
// refuses the module (it has a replace directive), so it is downloaded and
// built in the module cache with release flags, which makes it report the
// plain version (1.10.6, not 1.10.6-dev) to servers.
func EnsureTofu(ctx context.Context, root, version string, log io.Writer) (string, error) {
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return "", err
	}
	dir := ToolchainDir(absRoot, "tofu", version)
	bin := filepath.Join(dir, "tofu")
	if _, err := os.Stat(filepath.Join(dir, "SHA256SUMS")); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	fmt.Fprintf(log, "==> building tofu %s from %s (a few minutes the first time)\n", version, TofuModule)
	if err := buildFromModule(ctx, TofuModule, version, "./cmd/tofu",
		"-s -w -X github.com/opentofu/opentofu/version.dev=no", bin, log); err != nil {
		return "", fmt.Errorf("building OpenTofu: %w", err)
	}
	sum, err := sandbox.FileSHA256(bin)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(sum+"  tofu\n"), 0o644); err != nil {
		return "", err
	}
	return bin, nil
}

// TerraformModule is where Terraform's source is published as a Go module;
// 1.5.7 is its last MPL release, the second CLI the registry's end-to-end
// tests drive.
const TerraformModule = "github.com/hashicorp/terraform"

// EnsureTerraform builds Terraform version from its published Go module
// into the toolchain mirror under root (.tools/toolchains/terraform/<version>/)
// and records its checksum. A binary that still matches its recorded
// checksum is kept; anything else is rebuilt.
func EnsureTerraform(ctx context.Context, root, version string, log io.Writer) (string, error) {
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return "", err
	}
	dir := ToolchainDir(absRoot, "terraform", version)
	bin := filepath.Join(dir, "terraform")
	sums := filepath.Join(dir, "SHA256SUMS")
	if recorded, err := os.ReadFile(sums); err == nil {
		if sum, err := sandbox.FileSHA256(bin); err == nil && string(recorded) == sum+"  terraform\n" {
			return bin, nil
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	fmt.Fprintf(log, "==> building terraform %s from %s (several minutes the first time)\n", version, TerraformModule)
	// Terraform's release tags carry an empty prerelease, so the plain
	// build reports the plain version.
	if err := buildFromModule(ctx, TerraformModule, version, ".", "-s -w", bin, log); err != nil {
		return "", fmt.Errorf("building Terraform: %w", err)
	}
	sum, err := sandbox.FileSHA256(bin)
	if err != nil {
		return "", err
	}
	return bin, os.WriteFile(sums, []byte(sum+"  terraform\n"), 0o644)
}

// buildFromModule downloads module@v<version> and builds pkg inside it into
// bin. `go install` refuses modules with replace directives, so the build
// runs in the module cache with the module's own go.mod.
func buildFromModule(ctx context.Context, module, version, pkg, ldflags, bin string, log io.Writer) error {
	tmp, err := os.MkdirTemp("", "cairn-tool-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	dl := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@v"+version)
	dl.Dir = tmp
	dl.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := dl.Output()
	if err != nil {
		return fmt.Errorf("downloading %s: %w", module, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return fmt.Errorf("locating %s's module directory: %v", module, err)
	}
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", bin+".tmp", pkg)
	build.Dir = mod.Dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	build.Stdout, build.Stderr = log, log
	if err := build.Run(); err != nil {
		return err
	}
	return os.Rename(bin+".tmp", bin)
}
