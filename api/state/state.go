package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/cairnhq/cairn/api/platform/jsondoc"
)

// MaxStateBytes bounds one state (and one JSON state) in bytes.
const MaxStateBytes = 100_000_000

// Statuses of a state version.
const (
	StatusPending   = "pending"
	StatusFinalized = "finalized"
)

// Version is one state version of a workspace.
type Version struct {
	ID             string  `db:"id"`
	OrganizationID string  `db:"organization_id"`
	WorkspaceID    string  `db:"workspace_id"`
	Number         *int    `db:"number"`
	Serial         int64   `db:"serial"`
	Lineage        string  `db:"lineage"`
	MD5            string  `db:"md5"`
	Force          bool    `db:"force"`
	Status         string  `db:"status"`
	SHA256         []byte  `db:"sha256"`
	Size           *int64  `db:"size_bytes"`
	BlobKey        *string `db:"blob_key"`
	JSONBlobKey    *string `db:"json_blob_key"`
	ToolVersion    string  `db:"tool_version"`
	ResourceCount  int     `db:"resource_count"`
	// ResourcesCounted is false when the state's resources could not be
	// read (an encrypted state): ResourceCount is then unknown, not zero.
	ResourcesCounted bool       `db:"resources_counted"`
	CreatedByKind    string     `db:"created_by_kind"`
	CreatedByID      string     `db:"created_by_id"`
	RunID            *string    `db:"run_id"`
	CreatedAt        time.Time  `db:"created_at"`
	FinalizedAt      *time.Time `db:"finalized_at"`
}

// Finalized reports whether the version holds verified bytes.
func (v Version) Finalized() bool { return v.Status == StatusFinalized }

// Output is one root output of a finalized state. Value is nil for
// sensitive outputs: their values never leave the sealed state.
type Output struct {
	ID             string  `db:"id"`
	StateVersionID string  `db:"state_version_id"`
	Name           string  `db:"name"`
	Sensitive      bool    `db:"sensitive"`
	TypeJSON       string  `db:"type_json"`
	ValueJSON      *string `db:"value_json"`
}

var md5Pattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// CreateInput declares a new state version before its bytes arrive.
type CreateInput struct {
	Serial  int64
	MD5     string
	Lineage string
	Force   bool
	RunID   string
}

func (in CreateInput) validate() error {
	if in.Serial < 0 {
		return fmt.Errorf("%w: serial must not be negative", ErrInvalid)
	}
	if !md5Pattern.MatchString(in.MD5) {
		return fmt.Errorf("%w: md5 must be 32 lowercase hex digits", ErrInvalid)
	}
	if len(in.Lineage) > maxLineageBytes {
		return fmt.Errorf("%w: lineage is over %d characters", ErrInvalid, maxLineageBytes)
	}
	return nil
}

// succeeds decides whether a new version may follow the current one: the
// serial must grow and the lineage must match, unless forced. Re-sending
// the current state itself (same serial and bytes) is accepted, so a client
// retrying a write it lost the answer to does not fail.
func succeeds(current *Version, in CreateInput) error {
	if current == nil || in.Force {
		return nil
	}
	if in.Lineage != "" && current.Lineage != "" && in.Lineage != current.Lineage {
		return fmt.Errorf("%w: lineage %q does not match the current state's lineage %q", ErrConflict, in.Lineage, current.Lineage)
	}
	if in.Serial < current.Serial || (in.Serial == current.Serial && in.MD5 != current.MD5) {
		return fmt.Errorf("%w: serial %d must be greater than the current serial %d", ErrConflict, in.Serial, current.Serial)
	}
	return nil
}

// Parsed is what Cairn reads out of a state file: the header fields and the
// root outputs.
type Parsed struct {
	Version     int
	ToolVersion string
	Serial      int64
	Lineage     string
	Outputs     map[string]ParsedOutput
	// ResourceCount is how many managed resource instances the state
	// holds (data sources are not counted), when ResourcesCounted.
	ResourceCount int
	// ResourcesCounted: the state had a resources array and it was read
	// to the end. An encrypted state has none readable.
	ResourcesCounted bool
}

// ParsedOutput is one root output as the state file records it.
type ParsedOutput struct {
	Value     json.RawMessage `json:"value"`
	Type      json.RawMessage `json:"type"`
	Sensitive bool            `json:"sensitive"`
}

// maxOutputsBytes bounds how much of a state the outputs block may take.
const maxOutputsBytes = 16 << 20

// maxLineageBytes is the bound of a stored lineage (a column check).
const maxLineageBytes = 200

// budget lets a reader supply at most n more bytes while armed, so decoding
// one value (the outputs block) cannot buffer an unbounded amount.
type budget struct {
	r     io.Reader
	armed bool
	left  int64
}

var errBudget = errors.New("outputs block too large")

func (b *budget) Read(p []byte) (int, error) {
	if b.armed {
		if b.left <= 0 {
			return 0, errBudget
		}
		if int64(len(p)) > b.left {
			p = p[:b.left]
		}
	}
	n, err := b.r.Read(p)
	if b.armed {
		b.left -= int64(n)
	}
	return n, err
}

// errUnstorableOutputs means an output's name, type or value is text no
// column can hold (invalid UTF-8 or NUL); OpenTofu never writes one.
var errUnstorableOutputs = errors.New("state outputs are not UTF-8 text without NUL")

// ParseState reads the header, the outputs and the resource count of a
// state from r with bounded memory. It walks the top-level object token by
// token, decodes only the small fields and the outputs block, and counts
// the managed resource instances without holding them. A state that is not a plain JSON state (for example an
// encrypted one) yields no outputs and no error. What is returned can be
// stored as is: a tool version or lineage that could not be is left empty,
// and outputs that could not be are an error.
func ParseState(r io.Reader) (Parsed, error) {
	p, err := parseState(r)
	if !jsondoc.StorableText(p.ToolVersion) {
		p.ToolVersion = ""
	}
	if !jsondoc.StorableText(p.Lineage) || len(p.Lineage) > maxLineageBytes {
		p.Lineage = ""
	}
	for name, o := range p.Outputs {
		if !jsondoc.StorableText(name) || !jsondoc.StorableText(string(o.Type)) || !jsondoc.StorableText(string(o.Value)) {
			p.Outputs = nil
			return p, errUnstorableOutputs
		}
	}
	return p, err
}

// parseState walks the state with jsontext's tokenizer rather than
// encoding/json's Decoder.Token: every upload parses all of its bytes (the
// resources are counted), and Token's per-token allocations held a 100 MB
// upload to about 40 MB/s where jsontext runs several times faster. The
// options keep encoding/json's leniency (duplicate names, invalid UTF-8),
// so the same states parse as before.
func parseState(r io.Reader) (Parsed, error) {
	var p Parsed
	b := &budget{r: r}
	dec := jsontext.NewDecoder(b, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if t, err := dec.ReadToken(); err != nil || t.Kind() != '{' {
		return p, nil
	}
	for dec.PeekKind() != '}' {
		t, err := dec.ReadToken()
		if err != nil || t.Kind() != '"' {
			return p, nil
		}
		switch t.String() {
		case "version":
			err = decodeValue(dec, &p.Version)
		case "terraform_version":
			err = decodeValue(dec, &p.ToolVersion)
		case "serial":
			err = decodeValue(dec, &p.Serial)
		case "lineage":
			err = decodeValue(dec, &p.Lineage)
		case "outputs":
			b.armed, b.left = true, maxOutputsBytes
			err = decodeValue(dec, &p.Outputs)
			b.armed = false
			if err != nil {
				// A type error leaves the outputs decoded so far, with
				// the failing fields (sensitive, say) at their zero
				// value: none of them can be trusted.
				p.Outputs = nil
				return p, fmt.Errorf("reading state outputs: %w", err)
			}
		case "resources":
			// Counted token by token: the resources are never held.
			if p.ResourceCount, err = countInstances(dec); err != nil {
				p.ResourceCount = 0
			} else {
				p.ResourcesCounted = true
			}
		default:
			err = dec.SkipValue()
		}
		if err != nil {
			return p, nil
		}
	}
	return p, nil
}

// decodeValue reads the next value whole and decodes it into v with
// encoding/json, as the fields were decoded before.
func decodeValue(dec *jsontext.Decoder, v any) error {
	raw, err := dec.ReadValue()
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}

// countInstances consumes the state's resources array and counts the
// instances of its managed resources, never holding more than one token.
func countInstances(dec *jsontext.Decoder) (int, error) {
	if t, err := dec.ReadToken(); err != nil || t.Kind() != '[' {
		return 0, errors.New("resources is not an array")
	}
	n := 0
	for dec.PeekKind() != ']' {
		if t, err := dec.ReadToken(); err != nil || t.Kind() != '{' {
			return 0, errors.New("a resource is not an object")
		}
		managed, instances := false, 0
		for dec.PeekKind() != '}' {
			t, err := dec.ReadToken()
			if err != nil {
				return 0, err
			}
			switch t.String() {
			case "mode":
				v, err := dec.ReadToken()
				if err != nil || v.Kind() != '"' {
					return 0, errors.New("a resource's mode is not a string")
				}
				managed = v.String() == "managed"
			case "instances":
				if t, err := dec.ReadToken(); err != nil || t.Kind() != '[' {
					return 0, errors.New("instances is not an array")
				}
				for dec.PeekKind() != ']' {
					if err := dec.SkipValue(); err != nil {
						return 0, err
					}
					instances++
				}
				if _, err := dec.ReadToken(); err != nil {
					return 0, err
				}
			default:
				if err := dec.SkipValue(); err != nil {
					return 0, err
				}
			}
		}
		if _, err := dec.ReadToken(); err != nil {
			return 0, err
		}
		if managed {
			n += instances
		}
	}
	_, err := dec.ReadToken()
	return n, err
}

// OutputKind is the coarse output type the remote-backend protocol shows:
// string, number, boolean, array or object.
func OutputKind(typeJSON string) string {
	var t any
	if err := json.Unmarshal([]byte(typeJSON), &t); err != nil {
		return "string"
	}
	switch v := t.(type) {
	case string:
		if v == "bool" {
			return "boolean"
		}
		if v == "number" {
			return "number"
		}
		return "string"
	case []any:
		if len(v) > 0 {
			switch v[0] {
			case "list", "tuple", "set":
				return "array"
			case "object", "map":
				return "object"
			}
		}
	}
	return "string"
}
