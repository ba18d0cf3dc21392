// Package plandiff turns OpenTofu's machine-readable plan (`tofu show -json`)
// into the redacted plan-diff artifact cairn.plan-diff/v1 that reviewers read
// in a run's Changes tab. The raw plan cannot be shown to them: it carries
// sensitive variable values and attribute values in clear, and only the
// plan's own sensitivity masks say which is which. So only resource_changes
// is read, streamed one change at a time (a plan may be 100 MB); every value
// passes through its masks, and a resource whose masks do not fit its values
// is shown without detail rather than redacted by guesswork. The artifact is
// bounded (MaxResources, MaxBytes) and says when it was cut.
package plandiff
