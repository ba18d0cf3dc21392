package state_test

import (
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/state"
)

func TestParseStateCountsManagedResourceInstances(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		state   string
		want    int
		counted bool
	}{
		"none":  {`{"version":4,"serial":1,"lineage":"l","outputs":{},"resources":[]}`, 0, true},
		"one":   {`{"version":4,"outputs":{},"resources":[{"mode":"managed","type":"null_resource","name":"foo","instances":[{"attributes":{"id":"1"}}]}]}`, 1, true},
		"count": {`{"version":4,"outputs":{},"resources":[{"mode":"managed","type":"t","name":"a","instances":[{},{},{}]},{"mode":"data","type":"d","name":"b","instances":[{}]}]}`, 3, true},
		// Keys in any order, resources before outputs.
		"order": {`{"resources":[{"instances":[{"x":[1,{"y":2}]}],"mode":"managed"}],"outputs":{"o":{"value":"v","type":"string"}}}`, 1, true},
		// Escaped names and repeated ones read as encoding/json reads
		// them (the last one wins), as OpenTofu reads its state.
		"escaped":   {`{"resources":[{"mo\u0064e":"managed","instances":[{},{}]}]}`, 2, true},
		"duplicate": {`{"resources":[{"mode":"data","mode":"managed","instances":[{}]}]}`, 1, true},
		"bad":       {`{"version":4,"outputs":{},"resources":[{"mode":{"x":1},"instances":[{}]}]}`, 0, false},
		// OpenTofu's client-side encryption: no resources to read, so
		// the count is unknown rather than zero.
		"encrypted": {`{"serial":1,"lineage":"l","meta":{"key_provider.pbkdf2.main":"e30="},"encrypted_data":"Zm9v","encryption_version":"v0"}`, 0, false},
	} {
		p, err := state.ParseState(strings.NewReader(tc.state))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if p.ResourceCount != tc.want || p.ResourcesCounted != tc.counted {
			t.Errorf("%s: ResourceCount = %d (counted %v), want %d (counted %v)", name, p.ResourceCount, p.ResourcesCounted, tc.want, tc.counted)
		}
	}
	p, err := state.ParseState(strings.NewReader(`{"resources":[{"mode":"managed","instances":[{}]}],"outputs":{"o":{"value":"v","type":"string"}}}`))
	if err != nil || p.Outputs["o"].Value == nil {
		t.Fatalf("outputs after resources: %+v, %v", p.Outputs, err)
	}
}
