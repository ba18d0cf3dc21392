package run

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// History is one ended run as SeedHistory writes it: the run, the
// attempts that ran its phases and the chunks of its plan log.
type History struct {
	Run      Run
	Attempts []Attempt
	Log      []string
}

// SeedConfigurations writes uploaded configuration versions for
// SeedHistory's runs to evaluate, through the insert an upload uses.
func SeedConfigurations(ctx context.Context, tx *sqlx.Tx, cvs []ConfigurationVersion) error {
	for _, cv := range cvs {
		if cv.Status != ConfigurationUploaded {
			return fmt.Errorf("seeding configuration version %s: status %q is not uploaded", cv.ID, cv.Status)
		}
		if err := insertConfigurationVersion(ctx, tx, cv); err != nil {
			return err
		}
	}
	return nil
}

// SeedHistory writes runs that already ended through the same inserts
// that CreateRun, the attempt queue and the log sink use, in the caller's
// transaction. It exists so a load test (cairn-bench's growth curves) can
// give an organization a history of hundreds of thousands of runs without
// planning each one; nothing that serves requests calls it. Only terminal
// runs are accepted: an unfinished one would hold its workspace's queue
// with no job to move it.
func SeedHistory(ctx context.Context, tx *sqlx.Tx, runs []History) error {
	for _, h := range runs {
		if !h.Run.Status.Terminal() {
			return fmt.Errorf("seeding run %s: status %q is not terminal", h.Run.ID, h.Run.Status)
		}
		if err := insertRun(ctx, tx, h.Run); err != nil {
			return err
		}
		for _, a := range h.Attempts {
			if a.RunID != h.Run.ID {
				return fmt.Errorf("seeding run %s: attempt %s belongs to run %s", h.Run.ID, a.ID, a.RunID)
			}
			if err := insertAttempt(ctx, tx, a); err != nil {
				return err
			}
		}
		for i, chunk := range h.Log {
			if err := insertLogChunk(ctx, tx, h.Run.ID, int64(i+1), PhasePlan, chunk); err != nil {
				return err
			}
		}
	}
	return nil
}
