package worker

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/cairnhq/cairn/api/platform/buildinfo"
	"github.com/cairnhq/cairn/api/policy/rego"
	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/jobs/runner"
)

// workerIdentity is what this worker records of itself on every attempt it
// starts (run.WorkerIdentity): the SHA-256 of its own executable, read once
// here, the source revision and version stamped into it, its runner's state
// protocol and the policy engine its policy program (cairn-policy) links,
// which package rego names without linking it.
func workerIdentity() (run.WorkerIdentity, error) {
	exe, err := os.Executable()
	if err != nil {
		return run.WorkerIdentity{}, fmt.Errorf("locating the worker executable: %w", err)
	}
	f, err := os.Open(exe)
	if err != nil {
		return run.WorkerIdentity{}, fmt.Errorf("reading the worker executable: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return run.WorkerIdentity{}, fmt.Errorf("hashing the worker executable: %w", err)
	}
	return run.WorkerIdentity{BuildSHA: hex.EncodeToString(h.Sum(nil)), DefinitionSHA: sourceRevision(), Version: buildinfo.Version,
		Protocol: runner.StateProtocol, PolicyEngine: "opa/" + rego.EngineVersion}, nil
}

// sourceRevision is the commit the build was made from: the one `make
// build` stamps, else the one the Go toolchain recorded, else none.
func sourceRevision() string {
	if buildinfo.Revision != "" {
		return buildinfo.Revision
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return ""
}
