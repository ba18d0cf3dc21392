package policyeval

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/api/policy/rego"
	"github.com/cairnhq/cairn/jobs/sandbox"
)

// Memory of one evaluation process (sandbox.Limits.MaxDataBytes: the
// private writable memory it maps). The Go runtime, its threads' stacks
// and the program's own state take about goBaselineBytes before a policy
// runs; the rest is the evaluation's heap.
const (
	DefaultMaxMemoryBytes = 1 << 30
	MinMaxMemoryBytes     = 256 << 20
	goBaselineBytes       = 128 << 20
)

// Options configure an Evaluator.
type Options struct {
	// Program is the host path of the policy program (ProgramName,
	// ProgramBeside), which evaluates when invoked as "evaluate REQUEST".
	// It is checked (CheckProgram) before each evaluation: without it
	// every evaluation is an error.
	Program string
	// APIOrigin is the scheme and host at which children reach cairn-api
	// (https://host:port, as sandboxed tofu reaches it).
	APIOrigin string
	// CAFile is the CA bundle children trust for the API's certificate;
	// empty means the system roots.
	CAFile string
	// MaxMemoryBytes is each child's memory ceiling; zero means
	// DefaultMaxMemoryBytes. At least MinMaxMemoryBytes.
	MaxMemoryBytes uint64
	// MaxCPUSeconds is each child's CPU-time limit. Zero derives it from
	// the evaluation's timeout, rounded up, plus a second: a child runs on
	// one processor (GOMAXPROCS=1), so a busy child meets its wall clock
	// first and the CPU limit is the backstop.
	MaxCPUSeconds uint64
	// Concurrency bounds the children running at once across all runs of
	// the worker; zero means one per processor.
	Concurrency int
	Logger      *slog.Logger
}

// Evaluator runs each evaluation in a child process in its own sandbox.
// One Evaluator serves every run of a worker, so its slots bound how many
// evaluation processes the worker has at once. Safe for concurrent use.
type Evaluator struct {
	driver sandbox.Driver
	opts   Options
	slots  chan struct{}
}

var _ policy.Evaluator = (*Evaluator)(nil)

// New returns an Evaluator creating its sandboxes with driver.
func New(driver sandbox.Driver, opts Options) (*Evaluator, error) {
	if opts.MaxMemoryBytes == 0 {
		opts.MaxMemoryBytes = DefaultMaxMemoryBytes
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = runtime.NumCPU()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	switch u, err := url.Parse(opts.APIOrigin); {
	case !filepath.IsAbs(opts.Program):
		return nil, fmt.Errorf("policy evaluator: Program %q must be an absolute path", opts.Program)
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/"):
		return nil, fmt.Errorf("policy evaluator: APIOrigin %q must be an http(s) origin", opts.APIOrigin)
	case opts.MaxMemoryBytes < MinMaxMemoryBytes:
		return nil, fmt.Errorf("policy evaluator: MaxMemoryBytes %d must be at least %d", opts.MaxMemoryBytes, MinMaxMemoryBytes)
	}
	opts.APIOrigin = strings.TrimRight(opts.APIOrigin, "/")
	return &Evaluator{driver: driver, opts: opts, slots: make(chan struct{}, opts.Concurrency)}, nil
}

// Evaluate runs every request in its own child, at most Concurrency at a
// time across the worker, and returns the outcomes in order. A child that
// outlives its timeout or meets a ceiling is that evaluation's error; the
// others carry on.
func (e *Evaluator) Evaluate(ctx context.Context, input []byte, requests []policy.EvaluationRequest) []policy.Outcome {
	outcomes := make([]policy.Outcome, len(requests))
	var wg sync.WaitGroup
	for i, r := range requests {
		wg.Go(func() { outcomes[i] = e.evaluateOne(ctx, input, r) })
	}
	wg.Wait()
	return outcomes
}

func (e *Evaluator) evaluateOne(ctx context.Context, input []byte, r policy.EvaluationRequest) policy.Outcome {
	select {
	case e.slots <- struct{}{}:
	case <-ctx.Done():
		return policy.Outcome{Err: ctx.Err()}
	}
	defer func() { <-e.slots }()
	began := time.Now()
	decision, err := e.run(ctx, input, r, began)
	if err != nil && ctx.Err() != nil {
		err = ctx.Err() // no verdict: the attempt itself ended
	}
	return policy.Outcome{Decision: decision, Err: err, Duration: time.Since(began)}
}

func evaluatorFailed(format string, args ...any) error {
	return &rego.EvalError{Code: rego.CodeEvaluatorFailed, Detail: fmt.Sprintf(format, args...)}
}

// run is one child's life: a fresh sandbox holding the input and the
// request, the program run under its ceilings, and what it left on stdout.
func (e *Evaluator) run(ctx context.Context, input []byte, r policy.EvaluationRequest, began time.Time) ([]byte, error) {
	if r.Timeout <= 0 || r.Grant == nil {
		return nil, evaluatorFailed("evaluation request without a timeout or grant")
	}
	deadline := began.Add(r.Timeout)
	cpu := e.opts.MaxCPUSeconds
	if cpu == 0 {
		cpu = uint64((r.Timeout+time.Second-1)/time.Second) + 1
	}
	program, err := CheckProgram(e.opts.Program)
	if err != nil {
		e.opts.Logger.ErrorContext(ctx, "policy evaluation refused", "run_id", r.RunID, "sequence", r.Sequence, "error", err)
		return nil, evaluatorFailed("%v", err)
	}
	spec := sandbox.Spec{
		Name: fmt.Sprintf("%s-policy-%d", r.RunID, r.Sequence),
		Env:  childEnv(e.opts.MaxMemoryBytes),
		Limits: sandbox.Limits{WallClock: r.Timeout, MaxCPUSeconds: cpu, MaxDataBytes: e.opts.MaxMemoryBytes,
			MaxOpenFiles: 64, MaxFileBytes: 1 << 20},
	}
	if e.opts.CAFile != "" {
		spec.ReadOnlyFiles = map[string]string{caFile: e.opts.CAFile}
	}
	sb, err := e.driver.Create(ctx, spec)
	if err != nil {
		return nil, evaluatorFailed("creating the evaluation sandbox: %v", err)
	}
	defer func() { _ = sb.Destroy(context.WithoutCancel(ctx)) }()
	if err := sb.InstallTool(ctx, sandbox.VerifiedTool{Name: ProgramName, Path: program}); err != nil {
		return nil, evaluatorFailed("installing the evaluation program: %v", err)
	}
	request := Request{BundleURL: e.opts.APIOrigin + r.Grant(deadline), BundleSHA256: hex.EncodeToString(r.BundleSHA256),
		DeadlineUnixMS: deadline.UnixMilli()}
	if e.opts.CAFile != "" {
		request.CAFile = sb.FilePath(caFile)
	}
	req, err := json.Marshal(request)
	if err != nil {
		return nil, evaluatorFailed("encoding the request: %v", err)
	}
	for name, body := range map[string][]byte{InputFile: input, requestFile: req} {
		if err := os.WriteFile(filepath.Join(sb.WorkDir(), name), body, 0o600); err != nil {
			return nil, evaluatorFailed("writing %s: %v", name, err)
		}
	}
	cmd := sandbox.Command{Args: []string{ProgramName, "evaluate", requestFile}}
	stdout, stderr := &boundedBuffer{limit: maxResponseBytes}, &boundedBuffer{limit: 4 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	code, err := sb.Run(ctx, cmd)
	decision, verdict := interpret(code, err, stdout, stderr, r.Timeout)
	if code != 0 || err != nil {
		// The process did not end with a response of its own; its stderr
		// holds only what the Go runtime or the program said about why.
		e.opts.Logger.WarnContext(ctx, "policy evaluation process failed", "run_id", r.RunID, "sequence", r.Sequence,
			"policy_version_id", r.PolicyVersionID, "exit_code", code, "code", rego.CodeOf(verdict), "stderr", stderr.head(512))
	}
	return decision, verdict
}

// childEnv is all a child's environment holds besides what the driver
// sets: one processor, one C allocator arena (each would map 64 MiB), no
// goroutine dump on a fatal error, and a garbage collector that runs only
// near the ceiling (GOGC=off with a soft limit at three quarters of the
// heap's share): a child lives for one evaluation, and collecting earlier
// costs it a third of its time for memory it would free by exiting.
func childEnv(maxMemory uint64) map[string]string {
	return map[string]string{"GOMAXPROCS": "1", "GOTRACEBACK": "none", "GOGC": "off",
		"GOMEMLIMIT": strconv.FormatUint((maxMemory-goBaselineBytes)/4*3, 10)}
}

// Exit statuses of a child the kernel killed at its CPU-time limit
// (SIGXCPU at the soft limit, SIGKILL at the hard one, which the driver
// sets equal).
var cpuLimitStatuses = []int{128 + int(unix.SIGKILL), 128 + int(unix.SIGXCPU)}

// interpret maps how a child ended to its decision or a safe code.
func interpret(code int, runErr error, stdout, stderr *boundedBuffer, timeout time.Duration) ([]byte, error) {
	switch {
	case errors.Is(runErr, sandbox.ErrTimedOut):
		return nil, &rego.EvalError{Code: rego.CodeEvaluationTimeout, Detail: fmt.Sprintf("no decision within %v", timeout)}
	case runErr != nil:
		return nil, evaluatorFailed("running the evaluation process: %v", runErr)
	case code == 0:
		return readResponse(stdout)
	}
	switch MetLimit(code, stderr.Bytes()) {
	case LimitMemory:
		return nil, &rego.EvalError{Code: rego.CodeEvaluationMemoryLimit, Detail: "the evaluation process met its memory ceiling"}
	case LimitCPU:
		return nil, &rego.EvalError{Code: rego.CodeEvaluationCPULimit, Detail: "the evaluation process met its CPU-time limit"}
	}
	// The memory watch writes its verdict before it exits; a process that
	// died on the way out had still met its ceiling.
	var verdict *rego.EvalError
	if _, err := readResponse(stdout); errors.As(err, &verdict) && verdict.Code == rego.CodeEvaluationMemoryLimit {
		return nil, verdict
	}
	return nil, evaluatorFailed("the evaluation process exited %d", code)
}

// Ceilings MetLimit recognizes.
const (
	LimitCPU    = "cpu"
	LimitMemory = "memory"
)

// MetLimit names the ceiling a sandboxed Go program (the evaluation or the
// build program) met, judging by its exit status and the start of its
// stderr: LimitMemory when the Go runtime gave up on memory, LimitCPU when
// the kernel killed it at its CPU-time limit, "" otherwise. Only the Go
// runtime writes those words there; the programs print no policy text to
// stderr before they exit normally.
func MetLimit(exitCode int, stderr []byte) string {
	switch {
	case outOfMemory(exitCode, stderr):
		return LimitMemory
	case exitCode == cpuLimitStatuses[0] || exitCode == cpuLimitStatuses[1]:
		return LimitCPU
	}
	return ""
}

// outOfMemory recognizes the Go runtime giving up on memory: a fatal
// error (exit status 2) naming memory; a fault inside the runtime itself
// (a SIGSEGV on goroutine 0, the runtime's own stack), which is how the
// collector fails when the ceiling refuses it memory mid-collection; or a
// thread it could not create (abort, 134) for want of memory.
func outOfMemory(code int, stderr []byte) bool {
	switch code {
	case 2:
		return bytes.Contains(stderr, []byte("out of memory")) || bytes.Contains(stderr, []byte("cannot allocate memory")) ||
			bytes.Contains(stderr, []byte("failed to reserve page summary memory")) ||
			(bytes.HasPrefix(stderr, []byte("SIGSEGV: segmentation violation")) && bytes.Contains(stderr, []byte("\ngoroutine 0 ")))
	case 128 + int(unix.SIGABRT):
		return bytes.Contains(stderr, []byte("pthread_create failed"))
	}
	return false
}

// readResponse reads the child's one response document. A decision is
// returned as written, for the policy service to validate.
func readResponse(stdout *boundedBuffer) ([]byte, error) {
	if stdout.overflowed {
		return nil, &rego.EvalError{Code: rego.CodeDecisionInvalid, Detail: fmt.Sprintf("evaluation output is over %d bytes", stdout.limit)}
	}
	dec := json.NewDecoder(bytes.NewReader(stdout.Bytes()))
	dec.DisallowUnknownFields()
	var resp Response
	if err := dec.Decode(&resp); err != nil {
		return nil, evaluatorFailed("decoding the evaluation output: %v", err)
	}
	if dec.More() {
		return nil, evaluatorFailed("the evaluation output holds more than one document")
	}
	switch {
	case resp.Error != "" && len(resp.Decision) > 0:
		return nil, evaluatorFailed("the evaluation output has both a decision and an error")
	case resp.Error != "" && knownChildCode(resp.Error):
		return nil, &rego.EvalError{Code: resp.Error, Detail: "reported by the evaluation process"}
	case resp.Error != "":
		return nil, evaluatorFailed("the evaluation process reported an unknown code")
	case len(resp.Decision) == 0:
		return nil, evaluatorFailed("the evaluation output has no decision")
	}
	return resp.Decision, nil
}

// boundedBuffer keeps the first limit bytes written and notes whether
// more came; it never refuses a write, so a chatty child is not blocked
// or killed by a full pipe.
type boundedBuffer struct {
	mu         sync.Mutex
	buf        bytes.Buffer
	limit      int
	overflowed bool
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, room := len(p), b.limit-b.buf.Len()
	if n > room {
		b.overflowed = true
		p = p[:max(room, 0)]
	}
	b.buf.Write(p)
	return n, nil
}

// Bytes returns what was kept.
func (b *boundedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

func (b *boundedBuffer) head(n int) string {
	kept := b.Bytes()
	return string(kept[:min(n, len(kept))])
}
