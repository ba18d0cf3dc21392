package workspace

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Variable is a workspace input variable. Value is nil for sensitive
// variables: their value is sealed at rest and never read back.
type Variable struct {
	ID             string    `db:"id"`
	OrganizationID string    `db:"organization_id"`
	WorkspaceID    string    `db:"workspace_id"`
	Key            string    `db:"key"`
	Category       string    `db:"category"`
	Value          *string   `db:"value"`
	Sensitive      bool      `db:"sensitive"`
	HCL            bool      `db:"hcl"`
	Description    string    `db:"description"`
	ValueVersion   int       `db:"value_version"`
	ValueDigest    []byte    `db:"value_digest"`
	CreatedAt      time.Time `db:"created_at"`
	UpdatedAt      time.Time `db:"updated_at"`
}

const (
	// MaxValueBytes bounds one variable value.
	MaxValueBytes = 65536
	// MaxDescriptionChars bounds a description.
	MaxDescriptionChars = 2000
)

// KeyPattern is the key a workspace or variable-set variable may have: an
// OpenTofu identifier, or one that starts with a digit. HCP Terraform takes
// any key, and its clients (go-tfe's own tests among them) write random
// UUIDs; a digit-leading key is accepted for them, but no configuration can
// declare it, so a run skips it with a warning line (IsIdentifier), as tofu
// only warns about an undeclared variable in a variables file.
const KeyPattern = `^[A-Za-z0-9_][A-Za-z0-9_-]{0,127}$`

var variableKey = regexp.MustCompile(KeyPattern)

// ValidateKey checks a stored variable's name: letters, digits, "_" and
// "-", not starting with "-", at most 128 characters.
func ValidateKey(key string) error {
	if !variableKey.MatchString(key) {
		return fmt.Errorf("%w: key must match %s", ErrInvalid, variableKey)
	}
	return nil
}

// VersionID identifies one stored version of a variable (workspace or
// set): it changes with every write, value or not, as HCP's version-id
// does, and reveals nothing about the value.
func VersionID(id string, valueVersion int, updatedAt time.Time) string {
	h := sha256.New()
	h.Write([]byte(id))
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(valueVersion)))
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(updatedAt.UnixMicro())))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// envKey is an environment variable's name.
var envKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// CategoryKeyRule is the rule a variable's category and key break, or ""
// when they break none: a terraform key as ValidateKey, an env key a shell
// name, which cannot be HCL. Whether the runner owns an env name is the
// caller's check (credential.RunnerOwnsEnvironmentName; the runner also
// drops such names).
func CategoryKeyRule(key, category string, hcl bool) string {
	switch category {
	case CategoryTerraform:
		if !variableKey.MatchString(key) {
			return "key must match " + KeyPattern
		}
	case CategoryEnv:
		if hcl {
			return "an env variable cannot be HCL"
		}
		if !envKey.MatchString(key) {
			return "an env key must match " + envKey.String()
		}
	default:
		return "category must be terraform or env"
	}
	return ""
}

// IsIdentifier reports whether a configuration can declare a variable of
// this name: what a run's variables (-var) must be, and what the runner
// passes to tofu.
func IsIdentifier(key string) bool {
	return variableKey.MatchString(key) && (key[0] < '0' || key[0] > '9')
}

// ValidateValue checks size, encoding and, for HCL values, syntax.
func ValidateValue(value string, isHCL bool) error {
	if len(value) > MaxValueBytes {
		return fmt.Errorf("%w: value is over %d bytes", ErrInvalid, MaxValueBytes)
	}
	if !utf8.ValidString(value) || strings.ContainsRune(value, 0) {
		return fmt.Errorf("%w: value must be UTF-8 without NUL", ErrInvalid)
	}
	if isHCL {
		if _, diags := hclsyntax.ParseExpression([]byte(value), "value.hcl", hcl.InitialPos); diags.HasErrors() {
			return ErrInvalidHCL
		}
	}
	return nil
}

// ValidateDescription checks a description and returns it trimmed.
func ValidateDescription(raw string) (string, error) {
	d := strings.TrimSpace(raw)
	if utf8.RuneCountInString(d) > MaxDescriptionChars || !utf8.ValidString(d) {
		return "", fmt.Errorf("%w: description is over %d characters", ErrInvalid, MaxDescriptionChars)
	}
	return d, nil
}
