package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"time"

	"github.com/cairnhq/cairn/api/platform/failure"
)

// ErrRejected means an event or one of its values may not leave the
// process.
var ErrRejected = errors.New("telemetry value rejected")

var (
	namePattern = regexp.MustCompile(`^[a-z][a-z0-9_]{1,62}$`)
	// idPattern is an ID of api/platform/id: a short prefix and 128
	// random bits in 26 base32 characters, the last of which carries
	// three bits and two zero bits of padding, so it is one of eight.
	idPattern    = regexp.MustCompile(`^[a-z]{2,6}_[a-z2-7]{25}[aeimquy4]$`)
	enumPattern  = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)
	maxFields    = 16
	maxCount     = int64(1) << 53
	maxDuration  = 30 * 24 * time.Hour
	failureKinds = []string{"error", "non_error"}
)

// Value is one typed telemetry value; only this package's constructors
// make them, so free text has no way in.
type Value struct {
	kind    string
	str     string
	num     int64
	allowed []string
}

// ID is an opaque Cairn identifier (prefix_ and 26 base32 characters).
func ID(s string) Value { return Value{kind: "id", str: s} }

// Enum is one of a fixed set of short lowercase values.
func Enum(s string, allowed ...string) Value { return Value{kind: "enum", str: s, allowed: allowed} }

// Duration is a non-negative duration.
func Duration(d time.Duration) Value { return Value{kind: "duration", num: int64(d)} }

// Count is a non-negative count.
func Count(n int64) Value { return Value{kind: "count", num: n} }

// Bytes is a non-negative byte size.
func Bytes(n int64) Value { return Value{kind: "bytes", num: n} }

// Failure classifies an unhandled failure: "error" when it is an error
// value, "non_error" for anything else a panic carried. Its message, type
// and stack never leave.
func Failure(recovered any) Value {
	return Enum(failure.Classify(recovered), failureKinds...)
}

// Event is one operational event.
type Event struct {
	Name   string
	Fields map[string]Value
}

// Events lists the event names that may be emitted; anything else is
// rejected, so a new event is a reviewed change.
var Events = []string{
	"run_phase_finished",
	"policy_evaluated",
	"policy_build_finished",
	"state_version_stored",
	"blob_sweep_finished",
	"dispatch_reconciled",
	"unhandled_failure",
	"check_run_publication_failed",
	"launch_funnel",
}

// Validate checks an event against the boundary and names the first field
// that fails, never echoing its value.
func Validate(e Event) error {
	if !namePattern.MatchString(e.Name) || !slices.Contains(Events, e.Name) {
		return fmt.Errorf("%w: event name is not registered", ErrRejected)
	}
	if len(e.Fields) > maxFields {
		return fmt.Errorf("%w: more than %d fields", ErrRejected, maxFields)
	}
	for name, v := range e.Fields {
		if !namePattern.MatchString(name) {
			return fmt.Errorf("%w: field name is not a lowercase identifier", ErrRejected)
		}
		if err := v.check(); err != nil {
			return fmt.Errorf("%w: field %s: %v", ErrRejected, name, err)
		}
	}
	return nil
}

func (v Value) check() error {
	switch v.kind {
	case "id":
		if !idPattern.MatchString(v.str) {
			return errors.New("not an opaque ID")
		}
	case "enum":
		if !enumPattern.MatchString(v.str) || !slices.Contains(v.allowed, v.str) {
			return errors.New("not one of its enum's values")
		}
	case "route":
		if len(v.str) == 0 || len(v.str) > 200 || (v.str[0] != '/' && v.str != "unmatched") || !slices.Contains(v.allowed, v.str) {
			return errors.New("not one of the application's route templates")
		}
	case "duration":
		if v.num < 0 || v.num > int64(maxDuration) {
			return errors.New("duration out of range")
		}
	case "count", "bytes":
		if v.num < 0 || v.num > maxCount {
			return errors.New("out of range")
		}
	default:
		return errors.New("not a telemetry value")
	}
	return nil
}

// Attrs renders a valid event's fields for a log or export line.
func (e Event) Attrs() []any {
	out := make([]any, 0, 2*len(e.Fields))
	for name, v := range e.Fields {
		switch v.kind {
		case "id", "enum", "route":
			out = append(out, name, v.str)
		case "duration":
			out = append(out, name+"_ms", time.Duration(v.num).Milliseconds())
		default:
			out = append(out, name, v.num)
		}
	}
	return out
}

// Emit validates e and writes it to logger as one structured line; an
// event that fails the boundary is dropped and only its rejection (without
// values) is logged.
func Emit(ctx context.Context, logger *slog.Logger, e Event) error {
	if err := Validate(e); err != nil {
		logger.WarnContext(ctx, "telemetry event rejected", "reason", err.Error())
		return err
	}
	logger.InfoContext(ctx, "telemetry", append([]any{"event", e.Name}, e.Attrs()...)...)
	return nil
}
