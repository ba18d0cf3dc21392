package launch

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/cairnhq/cairn/api/platform/jsondoc"
)

// FuzzParse checks the launch-control parser, whose output decides who may
// use the service: a document is accepted only when it is one JSON value
// within the size bound that passes Validate, parsing is deterministic, and
// the canonical form stored for an accepted control parses back to a
// control with the same canonical form, with sorted lists and no text
// PostgreSQL's jsonb would refuse.
func FuzzParse(f *testing.F) {
	open := Default()
	open.PublicGate = true
	canary := Default()
	canary.CanaryAllowlist = []Pair{{OrganizationID: orgB, WorkspaceID: wsB}, {OrganizationID: orgA, WorkspaceID: wsA}}
	canary.RunnerReleases = []string{"cairn-runner-2", RunnerRelease}
	for _, c := range []Control{Default(), open, canary} {
		doc := c.Canonical()
		f.Add(doc)
		f.Add(append(bytes.Clone(doc), '}'))
		f.Add(bytes.Replace(doc, []byte(`"default"`), []byte(`"de\u0000fault"`), 1))
	}
	f.Add([]byte(`{"public_gate":true}`))
	f.Add([]byte(`{"PUBLIC_GATE":true,"public_gate":false}`))

	f.Fuzz(func(t *testing.T, doc []byte) {
		c, err := Parse(doc)
		again, errAgain := Parse(doc)
		if (err == nil) != (errAgain == nil) || !reflect.DeepEqual(c, again) {
			t.Fatalf("%q parsed as %+v (%v), then %+v (%v)", doc, c, err, again, errAgain)
		}
		if err != nil {
			return
		}
		if len(doc) > maxDocBytes || !json.Valid(doc) || c.Validate() != nil {
			t.Fatalf("accepted %q, which is not one valid control document within bounds", doc)
		}
		stored := c.Canonical()
		if err := jsondoc.CheckText(stored); err != nil {
			t.Fatalf("canonical form %s: %v", stored, err)
		}
		reread, err := Parse(stored)
		if err != nil {
			t.Fatalf("canonical form %s does not parse: %v", stored, err)
		}
		if !bytes.Equal(reread.Canonical(), stored) {
			t.Fatalf("canonical form %s reads back as %s", stored, reread.Canonical())
		}
		if !slices.IsSorted(reread.RunnerReleases) || !slices.IsSorted(reread.PolicyReleases) ||
			!slices.IsSortedFunc(reread.CanaryAllowlist, func(a, b Pair) int {
				return bytes.Compare([]byte(a.OrganizationID+"/"+a.WorkspaceID), []byte(b.OrganizationID+"/"+b.WorkspaceID))
			}) {
			t.Fatalf("canonical form %s has unsorted lists", stored)
		}
	})
}
