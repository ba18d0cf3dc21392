package rego_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/policy/rego"
)

// benchInput is a run with rego.MaxResourceChanges changes, every 50th
// missing its owner tag, as a valid input document.
func benchInput(tb testing.TB) []byte {
	tb.Helper()
	doc := validInput()
	changes := make([]any, 0, rego.MaxResourceChanges)
	for i := range rego.MaxResourceChanges {
		tags := map[string]any{"owner": "platform", "env": "prod", "cost_center": "cc-1"}
		if i%50 == 0 {
			delete(tags, "owner")
		}
		changes = append(changes, resourceChange(fmt.Sprintf("terraform_data.r%d", i), map[string]any{"input": map[string]any{"tags": tags}}))
	}
	doc["resource_changes"] = changes
	return mustJSON(tb, doc)
}

// BenchmarkEvaluate5000x10 measures what one run's policy stage costs at
// the contract's limits: one input of 5,000 resource changes, parsed once,
// evaluated against 10 loaded policies that each walk every change. One op
// is all 10 evaluations.
func BenchmarkEvaluate5000x10(b *testing.B) {
	doc := benchInput(b)
	input, err := rego.ParseInput(doc)
	if err != nil {
		b.Fatal(err)
	}
	policies := make([]*rego.Policy, 10)
	for i := range policies {
		src := strings.ReplaceAll(requireTags, `"id": sprintf("missing-%s-%s"`, fmt.Sprintf(`"id": sprintf("p%d-missing-%%s-%%s"`, i))
		policies[i] = loadPolicy(b, map[string]string{"p.rego": src})
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for _, p := range policies {
			d, err := p.Evaluate(ctx, input, 10*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			if len(d.Findings) != rego.MaxResourceChanges/50 {
				b.Fatalf("%d findings", len(d.Findings))
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(policies)), "ns/eval")
}

// BenchmarkParseInput5000 is the once-per-run cost of validating and
// converting that input.
func BenchmarkParseInput5000(b *testing.B) {
	doc := benchInput(b)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rego.ParseInput(doc); err != nil {
			b.Fatal(err)
		}
	}
}
