package launch

import (
	"context"
	"errors"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/platform/id"
)

// LeaseHolder is what a regional capacity lease is held for: one run phase
// attempt or one policy build, never both. Each holder has at most one
// lease, however often its job is replayed.
type LeaseHolder struct {
	AttemptID       string
	PolicyVersionID string
}

// column names the holder's lease column and its value. The names are
// constants of this file, never input.
func (h LeaseHolder) column() (string, string, error) {
	switch {
	case h.AttemptID != "" && h.PolicyVersionID == "":
		return "attempt_id", h.AttemptID, nil
	case h.PolicyVersionID != "" && h.AttemptID == "":
		return "policy_version_id", h.PolicyVersionID, nil
	}
	return "", "", errors.New("a capacity lease needs exactly one holder")
}

// TakeLease grants the holder a durable regional capacity lease in the
// caller's transaction, the one that records its sandbox-create intent
// (SPEC §1 rule 9): active leases never exceed the region's ceiling in the
// control in force (none without a control). ok is false when the region
// is full; the caller waits and tries again.
func (s *Service) TakeLease(ctx context.Context, tx *sqlx.Tx, region string, h LeaseHolder) (bool, error) {
	control, err := s.inForce(ctx, tx)
	if err != nil {
		return false, err
	}
	return acquireLease(ctx, tx, region, h, id.New("lease"), SandboxCeiling(control, region))
}

// ReleaseLease ends the holder's lease, if it has one, in the transaction
// that records the holder's end.
func ReleaseLease(ctx context.Context, q sqlx.ExtContext, h LeaseHolder) error {
	return releaseLease(ctx, q, h)
}
