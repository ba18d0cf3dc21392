package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/api/state"
	"github.com/cairnhq/cairn/jobs/sandbox"
)

// apply runs the saved plan in a fresh sandbox. The CLI publishes the
// successor state itself through /api/v2; the commit verifies it. An apply
// stopped on cancel, timeout or worker shutdown gets tofu's own interrupt
// (SIGINT, a terminal's Ctrl-C) and ApplyInterruptGrace to stop and save
// what it did: pushed through the run token when it still may, or kept as
// errored.tfstate when it may not (a cancel revokes the token). Either is
// recorded before the attempt ends, so recovery has the evidence.
func (r *Runner) apply(ctx context.Context, env *attemptEnv) error {
	// The sealed plan file is fetched while init runs: init never reads
	// it, and apply waits for both.
	planWritten := make(chan error, 1)
	go func() {
		start := time.Now()
		err := r.writePlanFile(ctx, env)
		env.timed("plan_file", start)
		planWritten <- err
	}()
	// A saved plan carries its backend's configuration, which apply uses:
	// initializing the backend here too would only repeat the plan's
	// round trips to the API.
	initErr := r.init(ctx, env, "-backend=false")
	if err := cmp.Or(initErr, <-planWritten); err != nil {
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

// writePlanFile unseals the run's plan file into the sandbox.
func (r *Runner) writePlanFile(ctx context.Context, env *attemptEnv) error {
	rc, err := r.Runs.OpenPlanFile(ctx, env.st.Run)
	if err != nil {
		return err
	}
	defer rc.Close()
	return writeFrom(env.sb, privatePath(planFile), rc)
}

// sealEmergencyState stores the errored.tfstate the CLI writes into its
// working directory when it cannot push state to the backend, or returns
// nil when there is none. The configuration's code ran in that directory
// and may have put a link or a FIFO there instead: the sandbox refuses
// to follow it, and the log says it was not kept.
func (r *Runner) sealEmergencyState(ctx context.Context, env *attemptEnv) (*run.Artifact, error) {
	f, err := env.sb.Open(filepath.Join(configDir, erroredState))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if errors.Is(err, sandbox.ErrUnsafePath) {
		env.logs.Line("The apply left an %s that is not a regular file of its sandbox; it is not kept.", erroredState)
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

// erroredState is the file the CLI keeps a state in when it cannot push it.
const erroredState = "errored.tfstate"

// writeFrom writes r to name in the sandbox's work directory.
func writeFrom(sb sandbox.Sandbox, name string, r io.Reader) error {
	f, err := sb.Create(name)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
