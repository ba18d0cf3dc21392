package runner

import (
	"context"
	"fmt"
	"strings"

	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/jobs/sandbox"
)

// refuseUnisolated ends an attempt before anything of the run is unsealed
// when this worker cannot isolate sandboxes: the run's log and evidence say
// why, and that nothing ran.
func (r *Runner) refuseUnisolated(ctx context.Context, env *attemptEnv) error {
	st := r.Driver.Status()
	if st.Ready {
		return nil
	}
	profile := evidenceProfile(st.Profile)
	env.profile = &profile
	logs, err := r.Runs.NewLogSink(ctx, env.st.Run.ID, env.st.Attempt.Phase, nil)
	if err == nil {
		env.logs = logs
		logs.Line("Cairn %s phase of %s, attempt %d", env.st.Attempt.Phase, env.st.Run.ID, env.st.Attempt.Number)
		logs.Line("This worker cannot isolate sandboxes (%s), so it runs no user code here.", st.Reason)
		logs.Line("The %s phase ended before OpenTofu started: nothing was changed.", env.st.Attempt.Phase)
		if st.Reason == "sandbox_base_unavailable" {
			logs.Line("To fix it, the operator builds the sandbox base (make tools) or points CAIRN_SANDBOX_BASE at an unchanged one and restarts the worker; see docs/operating/sandboxes.md#the-managed-base.")
		} else {
			logs.Line("To fix it, the operator installs bubblewrap on the worker's host (make deps, or apt-get install bubblewrap util-linux) and restarts the worker; see docs/operating/sandboxes.md#when-isolation-is-unavailable.")
		}
	}
	return fmt.Errorf("%w: %s", sandbox.ErrIsolationUnavailable, st.Reason)
}

// evidenceProfile is a sandbox profile as a run records it.
func evidenceProfile(p sandbox.Profile) run.SandboxProfile {
	return run.SandboxProfile{Driver: p.Driver, Isolation: p.Isolation, Reason: p.Reason,
		Namespaces: p.Namespaces, Base: p.Base, BaseDigest: p.BaseDigest, Network: p.Network, User: p.User,
		Memory:     run.SandboxCeiling{Limit: p.Memory.Limit, Mechanism: p.Memory.Mechanism},
		Processes:  run.SandboxCeiling{Limit: p.Processes.Limit, Mechanism: p.Processes.Mechanism},
		CPUSeconds: p.CPUSeconds, OpenFiles: p.OpenFiles, FileBytes: p.FileBytes}
}

// describeProfile is the run log's one-line account of the sandbox.
func describeProfile(p run.SandboxProfile) string {
	ceilings := fmt.Sprintf("memory %d MiB (%s), processes %d (%s)",
		p.Memory.Limit>>20, p.Memory.Mechanism, p.Processes.Limit, p.Processes.Mechanism)
	if p.Isolation == run.SandboxUnisolated {
		return fmt.Sprintf("%s driver WITHOUT namespaces (operator opt-out), %s", p.Driver, ceilings)
	}
	return fmt.Sprintf("%s driver, own %s namespaces, base %s (%s), %s", p.Driver, strings.Join(p.Namespaces, "/"),
		p.Base, p.BaseDigest, ceilings)
}
