package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/state"
)

// apply runs the saved plan in a fresh sandbox. The CLI publishes the
// successor state itself through /api/v2; the commit verifies it. An apply
// stopped on cancel, timeout or worker shutdown gets tofu's own interrupt
// (SIGINT, a terminal's Ctrl-C) and ApplyInterruptGrace to stop and save
// what it did: pushed through the run token when it still may, or kept as
// errored.tfstate when it may not (a cancel revokes the token). Either is
// recorded before the attempt ends, so recovery has the evidence.
func (r *Runner) apply(ctx context.Context, env *attemptEnv) error {
	rc, err := r.Runs.OpenPlanFile(ctx, env.st.Run)
	if err != nil {
		return err
	}
	err = writeFrom(env.private(planFile), rc)
	rc.Close()
	if err != nil {
		return err
	}
	if err := r.init(ctx, env); err != nil {
		return err
	}
	cmd := r.tofuCommand(env, nil, "apply", "-input=false", "-no-color", env.private(planFile))
	cmd.StopSignal, cmd.StopGrace = syscall.SIGINT, r.ApplyInterruptGrace
	code, err := r.runTofu(ctx, env, "apply", cmd)
	interruption := env.interruption(err)
	if err != nil && interruption == "" {
		return err
	}
	// What the apply left is recorded even when ctx ended (a cancel, the
	// worker stopping), within a bound of its own.
	evidenceCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), EvidenceWindow)
	defer cancel()
	if interruption != "" {
		env.logs.Line("The apply was interrupted (%s).", interruption)
	}
	outcome := run.ApplyOutcome{ExitCode: code, Interruption: interruption}
	if code != 0 {
		emergency, err := r.sealEmergencyState(evidenceCtx, env)
		if err != nil {
			return err
		}
		outcome.Emergency = emergency
	}
	_ = env.logs.Flush(evidenceCtx, true)
	outcome.Timings = env.snapshot()
	_, err = r.Runs.CommitApply(evidenceCtx, env.st.Attempt.ID, outcome)
	if err != nil && outcome.Emergency != nil {
		r.Runs.DiscardArtifacts(evidenceCtx, []run.Artifact{*outcome.Emergency})
	}
	return err
}

// sealEmergencyState stores the errored.tfstate the CLI writes into its
// working directory when it cannot push state to the backend, or returns
// nil when there is none.
func (r *Runner) sealEmergencyState(ctx context.Context, env *attemptEnv) (*run.Artifact, error) {
	f, err := os.Open(filepath.Join(env.sb.WorkDir(), configDir, "errored.tfstate"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("opening the emergency state: %w", err)
	}
	defer f.Close()
	a, err := r.Runs.StoreArtifact(ctx, env.st, run.ArtifactEmergencyState, f, state.MaxStateBytes)
	if err != nil {
		return nil, fmt.Errorf("sealing the emergency state: %w", err)
	}
	env.logs.Line("The apply left a state it could not publish; it is kept sealed for recovery (sha256 %x).", a.SHA256)
	return &a, nil
}

func writeFrom(path string, r io.Reader) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
