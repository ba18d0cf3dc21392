package rego

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// InputMeta is what the run knows about itself; the plan supplies the
// resource changes.
type InputMeta struct {
	// RunID is optional; when set it must start with "run_".
	RunID string
	// Kind is KindManual, KindTracked or KindSpeculative.
	Kind string
	// CommitSHA is nil for a manual run and the 40-hex commit otherwise.
	CommitSHA *string
	// RepositoryID is the code-host repository ID, or the configuration
	// version ID (cfg_...) for a manual run.
	RepositoryID     string
	WorkingDirectory string
	WorkspaceID      string
	// WorkspaceMetadata is passed to policies as workspace.metadata; nil
	// is an empty object.
	WorkspaceMetadata map[string]any
}

// The input document. Fields are declared in sorted order so that
// CanonicalJSON writes every object with sorted keys.
type inputDoc struct {
	ResourceChanges []json.RawMessage `json:"resource_changes"`
	Run             inputRun          `json:"run"`
	Source          inputSource       `json:"source"`
	Version         string            `json:"version"`
	Workspace       inputWorkspace    `json:"workspace"`
}

type inputRun struct {
	ID   string `json:"id,omitempty"`
	Kind string `json:"kind"`
}

type inputSource struct {
	CommitSHA        *string `json:"commit_sha"`
	RepositoryID     string  `json:"repository_id"`
	WorkingDirectory string  `json:"working_directory"`
}

type inputWorkspace struct {
	ID       string         `json:"id"`
	Metadata map[string]any `json:"metadata"`
}

type inputChange struct {
	Address      string       `json:"address"`
	Change       inputActions `json:"change"`
	ProviderName string       `json:"provider_name"`
	Type         string       `json:"type"`
}

type inputActions struct {
	Actions         []string `json:"actions"`
	After           any      `json:"after"`
	AfterSensitive  any      `json:"after_sensitive"`
	Before          any      `json:"before"`
	BeforeSensitive any      `json:"before_sensitive"`
}

// planChange is the part of one element of a plan's resource_changes the
// input needs; everything else in the element is skipped by the decoder,
// and everything else in the plan is never decoded at all.
type planChange struct {
	Address      string `json:"address"`
	Deposed      string `json:"deposed"`
	Type         string `json:"type"`
	ProviderName string `json:"provider_name"`
	Change       struct {
		Actions         []string `json:"actions"`
		Before          any      `json:"before"`
		After           any      `json:"after"`
		BeforeSensitive any      `json:"before_sensitive"`
		AfterSensitive  any      `json:"after_sensitive"`
	} `json:"change"`
}

// BuildInput reads an OpenTofu plan (`tofu show -json`) from planJSON and
// returns the canonical cairn.policy.input/v1 document for it.
//
// The plan is streamed: only resource_changes is decoded, one change at a
// time, and every other part (variables, prior state, configuration) is
// skipped token by token, so memory holds one change plus the output, which
// may not pass MaxInputBytes. Every change is kept, no-ops and reads
// included, since a policy may care about what does not change. Each
// before and after has its sensitive subtrees replaced by null using its
// mask (a mask that does not fit anywhere nulls the whole value); the masks
// themselves are kept. after_unknown is not carried: unknown values are
// absent from after, and a policy sees them as absent. A deposed object
// shares its address with the current object, so its address gets the
// suffix " (deposed object KEY)", as tofu prints it, to stay unique.
//
// The output has passed the same checks as ParseInput; callers still call
// ParseInput to get the value to evaluate. Bad plans and bounds are
// *EvalError (CodeInputInvalid, CodeInputTooLarge); a failing reader or a
// cancelled ctx is returned wrapped as is.
func BuildInput(ctx context.Context, planJSON io.Reader, meta InputMeta) ([]byte, error) {
	dec := json.NewDecoder(planJSON)
	dec.UseNumber()
	changes, err := readPlan(ctx, dec)
	if err != nil {
		return nil, err
	}
	metadata := meta.WorkspaceMetadata
	if metadata == nil {
		metadata = map[string]any{}
	}
	doc, err := CanonicalJSON(inputDoc{
		ResourceChanges: changes,
		Run:             inputRun{ID: meta.RunID, Kind: meta.Kind},
		Source:          inputSource{CommitSHA: meta.CommitSHA, RepositoryID: meta.RepositoryID, WorkingDirectory: meta.WorkingDirectory},
		Version:         InputSchema,
		Workspace:       inputWorkspace{ID: meta.WorkspaceID, Metadata: metadata},
	})
	if err != nil {
		return nil, invalidInput("encoding input: %v", err)
	}
	if _, err := checkInput(doc); err != nil {
		return nil, err
	}
	return doc, nil
}

func readPlan(ctx context.Context, dec *json.Decoder) ([]json.RawMessage, error) {
	if err := expectDelim(dec, '{'); err != nil {
		return nil, err
	}
	changes := []json.RawMessage{}
	var formatSeen, changesSeen bool
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, planError(err)
		}
		switch key, _ := tok.(string); key {
		case "format_version":
			if formatSeen {
				return nil, invalidInput("plan: format_version given twice")
			}
			formatSeen = true
			var v string
			if err := dec.Decode(&v); err != nil {
				return nil, planError(err)
			}
			if major, _, _ := strings.Cut(v, "."); major != "1" {
				return nil, invalidInput("plan: unsupported format_version %q", limitText(v, 16))
			}
		case "resource_changes":
			// A second list could restate a change; neither is safe to
			// pick.
			if changesSeen {
				return nil, invalidInput("plan: resource_changes given twice")
			}
			changesSeen = true
			if changes, err = readChanges(ctx, dec); err != nil {
				return nil, err
			}
		default:
			if err := skipValue(ctx, dec); err != nil {
				return nil, err
			}
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, invalidInput("plan: data after the plan object")
	}
	// Without format_version this is not a plan (state JSON, say), and an
	// empty input would wrongly read as "nothing changes".
	if !formatSeen {
		return nil, invalidInput("plan: no format_version")
	}
	return changes, nil
}

func readChanges(ctx context.Context, dec *json.Decoder) ([]json.RawMessage, error) {
	changes := []json.RawMessage{}
	tok, err := dec.Token()
	if err != nil {
		return nil, planError(err)
	}
	if tok == nil { // a plan without changes may say null
		return changes, nil
	}
	if tok != json.Delim('[') {
		return nil, invalidInput("plan: resource_changes is not an array")
	}
	size := 0
	for dec.More() {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("reading plan: %w", err)
		}
		if len(changes) == MaxResourceChanges {
			return nil, inputTooLarge("plan has more than %d resource changes", MaxResourceChanges)
		}
		var c planChange
		if err := dec.Decode(&c); err != nil {
			return nil, planError(err)
		}
		encoded, err := CanonicalJSON(inputChangeFrom(c))
		if err != nil {
			return nil, invalidInput("plan: encoding resource change %d: %v", len(changes), err)
		}
		// Stop as soon as the output cannot fit, rather than after
		// holding a 100 MB plan's worth of changes.
		if size += len(encoded) + 1; size > MaxInputBytes {
			return nil, inputTooLarge("resource changes exceed %d bytes", MaxInputBytes)
		}
		changes = append(changes, encoded)
	}
	if err := expectDelim(dec, ']'); err != nil {
		return nil, err
	}
	return changes, nil
}

func inputChangeFrom(c planChange) inputChange {
	address := c.Address
	if c.Deposed != "" && address != "" {
		address += deposedAddressSeparator + c.Deposed + ")"
	}
	return inputChange{
		Address:      address,
		Type:         c.Type,
		ProviderName: c.ProviderName,
		Change: inputActions{
			Actions:         c.Change.Actions,
			Before:          redactValue(c.Change.Before, c.Change.BeforeSensitive),
			After:           redactValue(c.Change.After, c.Change.AfterSensitive),
			BeforeSensitive: c.Change.BeforeSensitive,
			AfterSensitive:  c.Change.AfterSensitive,
		},
	}
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return planError(err)
	}
	if tok != want {
		return invalidInput("plan: expected %q", want)
	}
	return nil
}

// skipValue reads past one value token by token, so the plan's other
// parts, which hold sensitive values in clear, are never held in memory.
func skipValue(ctx context.Context, dec *json.Decoder) error {
	depth := 0
	for n := 1; ; n++ {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("reading plan: %w", err)
			}
		}
		tok, err := dec.Token()
		if err != nil {
			return planError(err)
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}

// planError tells a malformed plan (a verdict on the input) from a failing
// reader (not one).
func planError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syntax) || errors.As(err, &typ) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return invalidInput("plan is not valid plan JSON: %v", err)
	}
	return fmt.Errorf("reading plan: %w", err)
}
