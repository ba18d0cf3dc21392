package sweep

import (
	"strings"
	"time"
)

// DefaultMinAge is how old an unreferenced object must be before it is
// deleted: far longer than any upload takes to commit its reference.
const DefaultMinAge = 24 * time.Hour

// keyRoots are the first segments of the keys the services build with
// blob.Key (state, run artifacts, configuration archives, policy sources
// and built policy artifacts).
var keyRoots = map[string]bool{
	"state":                  true,
	"runs":                   true,
	"configuration-versions": true,
	"policy-versions":        true,
	"policy-sources":         true,
}

// CairnShaped reports whether key is one Cairn could have written: a known
// root, then at least two segments of ID characters. Anything else in a
// shared bucket belongs to someone else and is left alone.
func CairnShaped(key string) bool {
	parts := strings.Split(key, "/")
	if len(parts) < 3 || !keyRoots[parts[0]] {
		return false
	}
	for _, p := range parts[1:] {
		if p == "" || len(p) > 200 {
			return false
		}
		for _, r := range p {
			if !(r >= 'a' && r <= 'z') && !(r >= '0' && r <= '9') && r != '_' && r != '-' && r != '.' {
				return false
			}
		}
	}
	return true
}

// Report says what one sweep did.
type Report struct {
	Listed  int
	Deleted int
	// Kept counts Cairn-shaped objects that were referenced or too young.
	Kept int
	// Foreign counts objects not shaped like Cairn's, never deleted.
	Foreign int
	Pages   int
}
