package blobkey

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cairnhq/cairn/api/platform/id"
)

// The layouts of every key Cairn writes, and so of the only keys its orphan
// sweep deletes. A {name} stands for an ID issued with that prefix (id.New
// or id.Derived): the name, an underscore and id.RandomLength characters of
// lowercase base32. Everything else is literal.
const (
	stateLayout          = "state/{org}/{ws}/{sv}-{obj}.tfstate"
	stateJSONLayout      = "state/{org}/{ws}/{sv}-{json}.json"
	configurationLayout  = "configuration-versions/{org}/{cfg}/{obj}"
	runLogSegmentLayout  = "runs/{org}/{run}/log/{logseg}"
	policySourceLayout   = "policy-sources/{org}/{obj}"
	policyArtifactLayout = "policy-versions/{org}/{pol}/{obj}"
	registryLayout       = "registry/{org}/{mod}/{modv}/{obj}"
)

// runArtifactKinds are the run artifact kinds (run.Artifact*, the
// run_artifacts.kind column) whose objects runArtifactLayout places.
var runArtifactKinds = []string{"plan_file", "plan_json", "plan_diff", "plan_json_redacted", "emergency_state"}

func runArtifactLayout(kind string) string { return "runs/{org}/{run}/" + kind + "/{obj}" }

// layouts is every layout Recognised accepts.
var layouts = func() []string {
	out := []string{stateLayout, stateJSONLayout, configurationLayout, runLogSegmentLayout, policySourceLayout, policyArtifactLayout,
		registryLayout}
	for _, kind := range runArtifactKinds {
		out = append(out, runArtifactLayout(kind))
	}
	return out
}()

// State is the key of one upload of a state version's body. Each upload
// gets an object ID of its own, so concurrent uploads of one pending
// version clean up only what they wrote.
func State(organizationID, workspaceID, versionID string) string {
	return fill(stateLayout, organizationID, workspaceID, versionID, id.New("obj"))
}

// OfStateVersion reports whether key holds a body of the state version:
// one of its uploads (State), or the single key of its ID that versions
// written before uploads had their own keys used.
func OfStateVersion(key, organizationID, workspaceID, versionID string) bool {
	own := fill("state/{org}/{ws}/{sv}-", organizationID, workspaceID, versionID)
	legacy := fill("state/{org}/{ws}/{sv}.tfstate", organizationID, workspaceID, versionID)
	return key == legacy || (strings.HasPrefix(key, own) && matches(stateLayout, key))
}

// StateJSON is the key of one upload of a state version's JSON form.
func StateJSON(organizationID, workspaceID, versionID string) string {
	return fill(stateJSONLayout, organizationID, workspaceID, versionID, id.New("json"))
}

// Configuration is the key of one upload of a configuration version's
// archive.
func Configuration(organizationID, configurationID string) string {
	return fill(configurationLayout, organizationID, configurationID, id.New("obj"))
}

// RunArtifact is the key of a new artifact of a run. A kind outside
// runArtifactKinds gives a key the sweep never deletes.
func RunArtifact(organizationID, runID, kind string) string {
	return fill(runArtifactLayout(safe(kind)), organizationID, runID, id.New("obj"))
}

// OfRunArtifact reports whether key holds an artifact of the kind that
// RunArtifact made for the run.
func OfRunArtifact(key, organizationID, runID, kind string) bool {
	own := fill("runs/{org}/{run}/", organizationID, runID) + safe(kind) + "/"
	return strings.HasPrefix(key, own) && matches(runArtifactLayout(safe(kind)), key)
}

// RunLogSegment is the key of a run's log segment.
func RunLogSegment(organizationID, runID, segmentID string) string {
	return fill(runLogSegmentLayout, organizationID, runID, segmentID)
}

// PolicySource is the key of an uploaded policy source archive.
func PolicySource(organizationID string) string {
	return fill(policySourceLayout, organizationID, id.New("obj"))
}

// PolicyArtifact is the key of an artifact a policy version's build made.
func PolicyArtifact(organizationID, policyVersionID string) string {
	return fill(policyArtifactLayout, organizationID, policyVersionID, id.New("obj"))
}

// RegistryModuleVersion is the key of one upload of a registry module
// version's archive. Each upload gets an object ID of its own, so two
// concurrent uploads of one pending version never overwrite each other.
func RegistryModuleVersion(organizationID, moduleID, versionID string) string {
	return fill(registryLayout, organizationID, moduleID, versionID, id.New("obj"))
}

// fill puts values into the layout's placeholders in order, each with
// anything that could leave its segment replaced.
func fill(layout string, values ...string) string {
	var b strings.Builder
	for {
		literal, rest, found := strings.Cut(layout, "{")
		b.WriteString(literal)
		if !found {
			return b.String()
		}
		_, layout, _ = strings.Cut(rest, "}")
		b.WriteString(safe(values[0]))
		values = values[1:]
	}
}

func safe(segment string) string {
	return strings.NewReplacer("/", "_", "..", "_", "{", "_", "}", "_").Replace(segment)
}

// Recognised reports whether key is exactly one the constructors above
// make. Anything else — another tool's object, a look-alike under one of
// Cairn's roots, a layout Cairn no longer writes — is not Cairn's to delete.
func Recognised(key string) bool {
	for _, layout := range layouts {
		if matches(layout, key) {
			return true
		}
	}
	return false
}

// matches reports whether key spells layout with a well-formed ID of the
// right prefix in each placeholder.
func matches(layout, key string) bool {
	for {
		literal, rest, found := strings.Cut(layout, "{")
		after, ok := strings.CutPrefix(key, literal)
		if !ok {
			return false
		}
		if !found {
			return after == ""
		}
		prefix, next, _ := strings.Cut(rest, "}")
		n := len(prefix) + 1 + id.RandomLength
		if len(after) < n || !id.HasPrefix(after[:n], prefix) {
			return false
		}
		key, layout = after[n:], next
	}
}

// MaxPrefixBytes bounds CAIRN_BLOB_PREFIX, keeping a prefixed key (Cairn's
// longest is about 120 bytes) far inside S3's 1,024-byte limit.
const MaxPrefixBytes = 256

// ParsePrefix checks a CAIRN_BLOB_PREFIX value and returns it normalised
// without its trailing slash, "" for none: a relative path of segments of
// letters, digits, '.', '_' and '-', none of them "." or "..", with at most
// one trailing slash. Its error reads after the value's name ("… is an
// absolute path").
func ParsePrefix(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	if len(raw) > MaxPrefixBytes {
		return "", fmt.Errorf("is longer than %d bytes", MaxPrefixBytes)
	}
	if strings.HasPrefix(raw, "/") {
		return "", errors.New("is an absolute path")
	}
	prefix := strings.TrimSuffix(raw, "/")
	for _, segment := range strings.Split(prefix, "/") {
		switch {
		case segment == "":
			return "", errors.New("has an empty segment")
		case segment == "." || segment == "..":
			return "", fmt.Errorf("has a %q segment", segment)
		case strings.ContainsFunc(segment, func(r rune) bool {
			return !(r >= 'a' && r <= 'z') && !(r >= 'A' && r <= 'Z') && !(r >= '0' && r <= '9') && r != '.' && r != '_' && r != '-'
		}):
			return "", fmt.Errorf("has a character other than letters, digits, '.', '_' and '-' in segment %q", segment)
		}
	}
	return prefix, nil
}
