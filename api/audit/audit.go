package audit

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Actor types an event can name.
const (
	ActorUser           = "user"
	ActorServiceAccount = "service_account"
	ActorOperator       = "operator"
	ActorSystem         = "system"
	ActorRun            = "run"
	// ActorTeam is a team API token: it acts as its team.
	ActorTeam = "team"
)

// Actor is who caused an event.
type Actor struct {
	Type string
	ID   string
}

// Event is one piece of audit evidence. Evidence holds identifiers, enums,
// counts and short labels only; Sanitize rejects anything that looks like a
// secret and bounds the rest.
type Event struct {
	ID             string          `db:"id"`
	OrganizationID string          `db:"organization_id"`
	Action         string          `db:"action"`
	ActorType      string          `db:"actor_type"`
	ActorID        string          `db:"actor_id"`
	TargetType     string          `db:"target_type"`
	TargetID       string          `db:"target_id"`
	RequestID      string          `db:"request_id"`
	Evidence       json.RawMessage `db:"evidence"`
	CreatedAt      time.Time       `db:"created_at"`
}

// Entry is what a mutation hands to Append.
type Entry struct {
	OrganizationID string
	Action         string
	Actor          Actor
	TargetType     string
	TargetID       string
	Evidence       map[string]any
}

const (
	maxEvidenceBytes = 16 << 10
	maxEvidenceDepth = 4
	maxStringLen     = 512
	maxKeys          = 64
)

var (
	actionPattern = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$`)
	keyPattern    = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
	// secretish names never belong in evidence, whatever their value.
	secretish = []string{"password", "secret", "token", "plaintext", "ciphertext", "private_key", "credential_value", "cookie"}
)

// Sanitize checks an entry and returns its evidence as canonical JSON. It is
// strict on purpose: a caller that tries to record a secret gets an error in
// its own transaction instead of a leak.
func Sanitize(e Entry) ([]byte, error) {
	if !actionPattern.MatchString(e.Action) {
		return nil, fmt.Errorf("%w: action %q", ErrEvidenceRejected, e.Action)
	}
	switch e.Actor.Type {
	case ActorUser, ActorServiceAccount, ActorOperator, ActorSystem, ActorRun, ActorTeam:
	default:
		return nil, fmt.Errorf("%w: actor type %q", ErrEvidenceRejected, e.Actor.Type)
	}
	if e.OrganizationID == "" || e.Actor.ID == "" {
		return nil, fmt.Errorf("%w: organization and actor are required", ErrEvidenceRejected)
	}
	if e.Evidence == nil {
		return []byte("{}"), nil
	}
	if err := checkValue(e.Evidence, 0); err != nil {
		return nil, err
	}
	out, err := json.Marshal(e.Evidence)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrEvidenceRejected, err)
	}
	if len(out) > maxEvidenceBytes {
		return nil, fmt.Errorf("%w: evidence is %d bytes", ErrEvidenceRejected, len(out))
	}
	return out, nil
}

func checkValue(v any, depth int) error {
	if depth > maxEvidenceDepth {
		return fmt.Errorf("%w: evidence nested too deeply", ErrEvidenceRejected)
	}
	switch val := v.(type) {
	case nil, bool, int, int32, int64, uint32, float64, time.Time:
		return nil
	case string:
		if len(val) > maxStringLen {
			return fmt.Errorf("%w: evidence string of %d bytes", ErrEvidenceRejected, len(val))
		}
		return nil
	case []string:
		if len(val) > maxKeys {
			return fmt.Errorf("%w: evidence list too long", ErrEvidenceRejected)
		}
		for _, s := range val {
			if err := checkValue(s, depth+1); err != nil {
				return err
			}
		}
		return nil
	case []any:
		if len(val) > maxKeys {
			return fmt.Errorf("%w: evidence list too long", ErrEvidenceRejected)
		}
		for _, item := range val {
			if err := checkValue(item, depth+1); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		if len(val) > maxKeys {
			return fmt.Errorf("%w: evidence has too many keys", ErrEvidenceRejected)
		}
		for k, item := range val {
			if !keyPattern.MatchString(k) {
				return fmt.Errorf("%w: evidence key %q", ErrEvidenceRejected, k)
			}
			for _, s := range secretish {
				if strings.Contains(k, s) {
					return fmt.Errorf("%w: evidence key %q names a secret", ErrEvidenceRejected, k)
				}
			}
			if err := checkValue(item, depth+1); err != nil {
				return err
			}
		}
		return nil
	default:
		return fmt.Errorf("%w: evidence value of type %T", ErrEvidenceRejected, v)
	}
}
