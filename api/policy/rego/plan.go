package rego

import (
	"context"
	"encoding/json"
	"errors"
	"io"

	"github.com/cairnhq/cairn/api/planjson"
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
	if _, err := CheckInput(doc); err != nil {
		return nil, err
	}
	return doc, nil
}

// readPlan collects the plan's resource changes, each already converted
// to its input form. A plan that is not plan JSON is an invalid input; a
// failing reader or a cancelled ctx is not a verdict and passes through.
func readPlan(ctx context.Context, dec *json.Decoder) ([]json.RawMessage, error) {
	changes := []json.RawMessage{}
	size, nodes, maskNodes := 0, 0, 0
	err := planjson.EachChange(ctx, dec, func(int) error {
		if len(changes) == MaxResourceChanges {
			return inputTooLarge("plan has more than %d resource changes", MaxResourceChanges)
		}
		var c planChange
		if err := dec.Decode(&c); err != nil {
			return planjson.DecodeError(err)
		}
		in := inputChangeFrom(c)
		encoded, err := CanonicalJSON(in)
		if err != nil {
			return invalidInput("plan: encoding resource change %d: %v", len(changes), err)
		}
		// Stop as soon as the output cannot fit, rather than after
		// holding a 100 MB plan's worth of changes.
		if size += len(encoded) + 1; size > MaxInputBytes {
			return inputTooLarge("resource changes exceed %d bytes", MaxInputBytes)
		}
		masks := countNodes(in.Change.BeforeSensitive) + countNodes(in.Change.AfterSensitive)
		if maskNodes += masks; maskNodes > MaxSensitivityMapNodes {
			return inputTooLarge("sensitivity masks have more than %d nodes", MaxSensitivityMapNodes)
		}
		// The change object, address, type, provider_name, the change's
		// object and its actions array.
		nodes += 6 + len(in.Change.Actions) + countNodes(in.Change.Before) + countNodes(in.Change.After) + masks
		if nodes > MaxInputNodes {
			return inputTooLarge("resource changes have more than %d nodes", MaxInputNodes)
		}
		changes = append(changes, encoded)
		return nil
	})
	if errors.Is(err, planjson.ErrMalformed) || errors.Is(err, planjson.ErrUnsupportedFormat) {
		return nil, invalidInput("plan: %v", err)
	}
	return changes, err
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

// countNodes counts the JSON values in a decoded value as checkBounds
// does: every object, array and scalar, not the keys.
func countNodes(v any) int {
	switch x := v.(type) {
	case map[string]any:
		n := 1
		for _, e := range x {
			n += countNodes(e)
		}
		return n
	case []any:
		n := 1
		for _, e := range x {
			n += countNodes(e)
		}
		return n
	}
	return 1
}
