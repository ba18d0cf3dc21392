package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/policy/rego"
	"github.com/cairnhq/cairn/api/policy/rego/engine"
)

// benchInput is a valid input with as many resource changes as the node
// bound admits (every 50th missing its owner tag), and that count.
func benchInput(tb testing.TB) ([]byte, int) {
	tb.Helper()
	change := func(i int) any {
		tags := map[string]any{"owner": "platform", "env": "prod", "cost_center": "cc-1"}
		if i%50 == 0 {
			delete(tags, "owner")
		}
		return resourceChange(fmt.Sprintf("terraform_data.r%d", i), map[string]any{"input": map[string]any{"tags": tags}})
	}
	doc := validInput()
	doc["resource_changes"] = []any{change(1)}
	one := nodes(tb, mustJSON(tb, doc))
	doc["resource_changes"] = []any{change(1), change(2)}
	perChange := nodes(tb, mustJSON(tb, doc)) - one
	n := (rego.MaxInputNodes - (one - perChange)) / perChange
	changes := make([]any, 0, n)
	for i := range n {
		changes = append(changes, change(i))
	}
	doc["resource_changes"] = changes
	return mustJSON(tb, doc), n
}

// BenchmarkEvaluateAtBoundx10 measures what one run's policy stage costs
// at the contract's limits: one input of as many resource changes as the
// 50,000-node bound admits, parsed once, evaluated against 10 loaded
// policies that each walk every change. One op is all 10 evaluations.
func BenchmarkEvaluateAtBoundx10(b *testing.B) {
	doc, n := benchInput(b)
	input, err := engine.ParseInput(doc)
	if err != nil {
		b.Fatal(err)
	}
	policies := make([]*engine.Policy, 10)
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
			if len(d.Findings) != (n+49)/50 {
				b.Fatalf("%d findings", len(d.Findings))
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(policies)), "ns/eval")
}

// BenchmarkParseInputAtBound is the once-per-run cost of validating and
// converting that input.
func BenchmarkParseInputAtBound(b *testing.B) {
	doc, _ := benchInput(b)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := engine.ParseInput(doc); err != nil {
			b.Fatal(err)
		}
	}
}
