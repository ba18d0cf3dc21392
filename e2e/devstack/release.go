package devstack

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// ReleasePrograms are the programs an upgrade rolls: the API (which also
// applies migrations), the worker and the helper its sandboxes start
// through, which must sit beside the worker.
var ReleasePrograms = []string{"./api/cmd/cairn-api", "./jobs/cmd/cairn-worker", "./jobs/cmd/cairn-sandbox-exec"}

// releasePolicyProgram is the policy program a worker runs its policy
// builds and evaluations as, beside it. Releases before it re-executed
// the worker instead, so it is built only where the release has it.
const releasePolicyProgram = "./jobs/cmd/cairn-policy"

var fullCommit = regexp.MustCompile(`^[0-9a-f]{40}$`)

// ReadReleasePin reads a file that names one commit: its first line that is
// neither blank nor a # comment, a full 40-digit hash (an abbreviation
// could become ambiguous as history grows).
func ReadReleasePin(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !fullCommit.MatchString(line) {
			return "", fmt.Errorf("%s names %q, not a full 40-digit commit hash", path, line)
		}
		return line, nil
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s names no commit", path)
}

// ReleaseDir is where BuildRelease keeps commit's binaries under the
// repository root.
func ReleaseDir(root, commit string) string {
	return filepath.Join(root, ".tools", "previous-release", commit)
}

// BuildRelease builds ReleasePrograms as they were at commit, with the Go
// toolchain running now, into ReleaseDir(root, commit) and returns that
// directory. A directory already there is used as is: it only ever
// appears complete, because the build happens beside it and is renamed
// into place. A commit missing from a shallow clone is fetched from
// origin first; one that still cannot be found is an error, never a
// reason to skip.
func BuildRelease(ctx context.Context, root, commit string, log io.Writer) (string, error) {
	if !fullCommit.MatchString(commit) {
		return "", fmt.Errorf("release commit %q is not a full 40-digit hash", commit)
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return "", err
	}
	dir := ReleaseDir(root, commit)
	if releaseComplete(dir) {
		return dir, nil
	}
	if err := ensureCommit(ctx, root, commit, log); err != nil {
		return "", err
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	work, err := os.MkdirTemp(parent, commit+".build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	src, bin := filepath.Join(work, "src"), filepath.Join(work, "bin")
	if err := os.Mkdir(src, 0o755); err != nil {
		return "", err
	}
	if err := exportCommit(ctx, root, commit, src); err != nil {
		return "", err
	}
	fmt.Fprintf(log, "==> building the release at %s (once; kept in %s)\n", commit[:12], dir)
	// The running toolchain, never one the old go.mod would download: the
	// release is compared with today's build, not with a different compiler.
	// The revision is stamped as `make build` stamps it, so the old worker's
	// attempts name the commit they ran.
	args := append([]string{"build", "-ldflags",
		"-X github.com/cairnhq/cairn/api/platform/buildinfo.Version=" + commit[:12] +
			" -X github.com/cairnhq/cairn/api/platform/buildinfo.Revision=" + commit,
		"-o", bin + "/"}, ReleasePrograms...)
	if _, err := os.Stat(filepath.Join(src, releasePolicyProgram)); err == nil {
		args = append(args, releasePolicyProgram)
	}
	build := exec.CommandContext(ctx, "go", args...)
	build.Dir = src
	build.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-mod=readonly -buildvcs=false")
	build.Stdout, build.Stderr = log, log
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("building the release at %s: %w", commit, err)
	}
	// A worker refuses a cairn-sandbox-exec or cairn-policy that others
	// could replace.
	if err := os.Chmod(bin, 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(bin, dir); err != nil {
		// Another build finished first; its copy is as good as ours.
		if releaseComplete(dir) {
			return dir, nil
		}
		return "", fmt.Errorf("keeping the release build: %w", err)
	}
	return dir, nil
}

func releaseComplete(dir string) bool {
	for _, p := range ReleasePrograms {
		if fi, err := os.Stat(filepath.Join(dir, filepath.Base(p))); err != nil || !fi.Mode().IsRegular() {
			return false
		}
	}
	return true
}

// ensureCommit makes commit available in root's clone. CI checks out
// shallow clones, which lack older commits: it asks origin for the commit
// itself, then for the whole history.
func ensureCommit(ctx context.Context, root, commit string, log io.Writer) error {
	has := func() bool {
		return exec.CommandContext(ctx, "git", "-C", root, "cat-file", "-e", commit+"^{commit}").Run() == nil
	}
	if has() {
		return nil
	}
	fetches := [][]string{{"fetch", "--depth=50", "origin", commit}}
	if out, _ := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", "--is-shallow-repository").Output(); strings.TrimSpace(string(out)) == "true" {
		fetches = append(fetches, []string{"fetch", "--unshallow", "origin"})
	}
	for _, fetch := range fetches {
		fmt.Fprintf(log, "==> commit %s is not in this clone: git %s\n", commit[:12], strings.Join(fetch, " "))
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", root}, fetch...)...)
		cmd.Stdout, cmd.Stderr = log, log
		_ = cmd.Run()
		if has() {
			return nil
		}
	}
	return fmt.Errorf("the previous release %s is not in this clone and origin did not provide it: "+
		"fetch it (git fetch origin %s) or clone with more history", commit, commit)
}

// exportCommit writes commit's tree into dir, as `git archive | tar -x`
// does, without touching the clone's work tree or its list of worktrees.
func exportCommit(ctx context.Context, root, commit, dir string) error {
	archive := exec.CommandContext(ctx, "git", "-C", root, "archive", "--format=tar", commit)
	extract := exec.CommandContext(ctx, "tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	extract.Stdin = pipe
	var archiveErr, extractErr strings.Builder
	archive.Stderr, extract.Stderr = &archiveErr, &extractErr
	if err := extract.Start(); err != nil {
		return fmt.Errorf("starting tar: %w", err)
	}
	if err := archive.Run(); err != nil {
		_ = extract.Wait()
		return fmt.Errorf("git archive %s: %w: %s", commit, err, archiveErr.String())
	}
	if err := extract.Wait(); err != nil {
		return fmt.Errorf("extracting %s: %w: %s", commit, err, extractErr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return errors.New("the exported release has no go.mod")
	}
	return nil
}
