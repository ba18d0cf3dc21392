package policyeval

import (
	"encoding/json"
	"slices"

	"github.com/cairnhq/cairn/api/policy/rego"
)

// Files the worker leaves in the child's work directory; nothing else is
// there.
const (
	requestFile = "request.json"
	// InputFile is the sanitized input, beside the request.
	InputFile = "input.json"
	caFile    = "ca.pem"
)

// MaxRequestBytes bounds the request file the child reads.
const MaxRequestBytes = 16 << 10

// Request is what the child is asked to do.
type Request struct {
	// BundleURL is the absolute grant URL of the bundle (SPEC §4:
	// ?evaluation={sequence}, an HMAC grant bound to the attempt).
	BundleURL string `json:"bundle_url"`
	// BundleSHA256 is the snapshotted bundle digest, lowercase hex.
	BundleSHA256 string `json:"bundle_sha256"`
	// DeadlineUnixMS ends the evaluation (and the grant): the child stops
	// fetching and evaluating then, and the worker kills it soon after.
	DeadlineUnixMS int64 `json:"deadline_unix_ms"`
	// CAFile, when set, is the only CA bundle the child trusts for the
	// API's certificate (a path inside its sandbox); otherwise the system
	// roots.
	CAFile string `json:"ca_file,omitempty"`
}

// Response is the one JSON document the child writes to stdout: exactly
// one of Decision (for the worker to validate) or Error (a safe code).
type Response struct {
	Decision json.RawMessage `json:"decision,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// maxResponseBytes bounds what the worker reads from a child: a decision
// of at most rego.MaxDecisionBytes and the envelope around it.
const maxResponseBytes = rego.MaxDecisionBytes + 1024

// childCodes are the error codes a child may report. Anything else is
// reported as CodeEvaluatorFailed: a child cannot name a verdict the
// worker does not know.
var childCodes = []string{
	rego.CodeInputInvalid, rego.CodeInputTooLarge, rego.CodeDecisionUndefined, rego.CodeDecisionInvalid,
	rego.CodeEvaluationTimeout, rego.CodeEvaluatorFailed, rego.CodeBundleUnavailable, rego.CodeBundleMismatch,
	rego.CodeEvaluationMemoryLimit,
}

func knownChildCode(code string) bool { return slices.Contains(childCodes, code) }
