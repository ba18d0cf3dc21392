package policyeval

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/api/policy/rego"
	"github.com/cairnhq/cairn/jobs/sandbox"
)

// TestInterpretMapsEveryEnding: every way a child can end maps to its
// decision or one safe code, and nothing a child writes can name a code
// the worker does not know or smuggle a second document.
func TestInterpretMapsEveryEnding(t *testing.T) {
	t.Parallel()
	decision := `{"findings":[]}`
	tests := []struct {
		name   string
		code   int
		runErr error
		stdout string
		stderr string
		want   string // a code, or "decision"
	}{
		{"a decision", 0, nil, `{"decision":` + decision + "}\n", "", "decision"},
		{"a reported verdict", 0, nil, `{"error":"policy_decision_undefined"}`, "", rego.CodeDecisionUndefined},
		{"a reported bundle refusal", 0, nil, `{"error":"policy_bundle_unavailable"}`, "", rego.CodeBundleUnavailable},
		{"an unknown code", 0, nil, `{"error":"policy_passed"}`, "", rego.CodeEvaluatorFailed},
		{"its memory watch", 0, nil, `{"error":"policy_evaluation_memory_limit"}`, "", rego.CodeEvaluationMemoryLimit},
		{"a code it may not report", 0, nil, `{"error":"policy_evaluation_cpu_limit"}`, "", rego.CodeEvaluatorFailed},
		{"both fields", 0, nil, `{"decision":` + decision + `,"error":"policy_evaluation_timeout"}`, "", rego.CodeEvaluatorFailed},
		{"neither field", 0, nil, `{}`, "", rego.CodeEvaluatorFailed},
		{"an unknown field", 0, nil, `{"decision":` + decision + `,"verdict":"pass"}`, "", rego.CodeEvaluatorFailed},
		{"two documents", 0, nil, `{"error":"policy_decision_undefined"}{"decision":` + decision + `}`, "", rego.CodeEvaluatorFailed},
		{"no output", 0, nil, "", "", rego.CodeEvaluatorFailed},
		{"output over the bound", 0, nil, `{"decision":{"findings":[],"pad":"` + strings.Repeat("x", maxResponseBytes) + `"}}`, "", rego.CodeDecisionInvalid},
		{"wall clock", -1, fmt.Errorf("running: %w", sandbox.ErrTimedOut), "", "", rego.CodeEvaluationTimeout},
		{"sandbox failure", -1, errors.New("bwrap: setting up uid map"), "", "", rego.CodeEvaluatorFailed},
		{"killed at the CPU limit", 137, nil, "", "", rego.CodeEvaluationCPULimit},
		{"SIGXCPU", 152, nil, "", "", rego.CodeEvaluationCPULimit},
		{"Go out of memory", 2, nil, "", "fatal error: runtime: out of memory\n", rego.CodeEvaluationMemoryLimit},
		{"Go could not map memory", 2, nil, "", "runtime: out of memory: cannot allocate 4194304-byte block (381681664 in use)\nfatal error: out of memory\n", rego.CodeEvaluationMemoryLimit},
		{"no thread for want of memory", 134, nil, "", "runtime/cgo: pthread_create failed: Resource temporarily unavailable\nSIGABRT: abort\n", rego.CodeEvaluationMemoryLimit},
		{"the collector refused memory", 2, nil, "", "SIGSEGV: segmentation violation\nPC=0x43947d m=0 sigcode=1 addr=0x0\n\ngoroutine 0 gp=0x259dcc0 m=0 mp=0x25a03e0 [idle]:\nruntime.(*spanQueue).tryDrain(0x400?)\n", rego.CodeEvaluationMemoryLimit},
		{"some other panic", 2, nil, "", "panic: runtime error: index out of range\n", rego.CodeEvaluatorFailed},
		{"a nil dereference in the program", 2, nil, "", "panic: runtime error: invalid memory address or nil pointer dereference\n[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x4a1b2c]\n\ngoroutine 1 [running]:\n", rego.CodeEvaluatorFailed},
		{"a broken environment", 1, nil, "", "policy-evaluate: reading the request: no such file\n", rego.CodeEvaluatorFailed},
		{"memory words with another status", 1, nil, "", "out of memory\n", rego.CodeEvaluatorFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr := &boundedBuffer{limit: maxResponseBytes}, &boundedBuffer{limit: 4 << 10}
			_, _ = stdout.Write([]byte(tt.stdout))
			_, _ = stderr.Write([]byte(tt.stderr))
			got, err := interpret(tt.code, tt.runErr, stdout, stderr, time.Second)
			if tt.want == "decision" {
				if err != nil || string(got) != decision {
					t.Fatalf("got %s %v, want the decision", got, err)
				}
				return
			}
			if got != nil || rego.CodeOf(err) != tt.want {
				t.Fatalf("got %s, code %q (%v), want %q", got, rego.CodeOf(err), err, tt.want)
			}
		})
	}
}

func TestBoundedBufferNeverRefusesAWrite(t *testing.T) {
	t.Parallel()
	b := &boundedBuffer{limit: 4}
	for _, p := range []string{"ab", "cdef", "gh"} {
		if n, err := b.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", p, n, err)
		}
	}
	if string(b.Bytes()) != "abcd" || !b.overflowed {
		t.Fatalf("kept %q, overflowed %v", b.Bytes(), b.overflowed)
	}
}
