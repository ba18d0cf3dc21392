package audit

import "errors"

// ErrEvidenceRejected means an entry failed sanitization; the mutation that
// tried to record it fails with it.
var ErrEvidenceRejected = errors.New("audit evidence rejected")
