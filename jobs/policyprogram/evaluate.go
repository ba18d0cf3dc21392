package policyprogram

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cairnhq/cairn/api/policy/rego"
	"github.com/cairnhq/cairn/api/policy/rego/engine"
	"github.com/cairnhq/cairn/jobs/policyeval"
)

// Evaluate is the evaluation program, cairn-policy evaluate REQUEST, run
// in a sandbox's work directory (jobs/policyeval prepares it): it reads the request and the input
// beside it, fetches and verifies its bundle through the grant, evaluates,
// and writes one Response to stdout. A verdict on the input, the bundle or
// the policy is a Response with exit status 0; only a broken environment
// (no request, no input) returns an error. Nothing the policy or its input
// says goes to stdout or stderr but the decision itself.
func Evaluate(ctx context.Context, requestPath string, stdout io.Writer) error {
	raw, err := readBounded(requestPath, policyeval.MaxRequestBytes)
	if err != nil {
		return fmt.Errorf("reading the request: %w", err)
	}
	var req policyeval.Request
	if err := json.Unmarshal(raw, &req); err != nil {
		return fmt.Errorf("decoding the request: %w", err)
	}
	doc, err := readBounded(filepath.Join(filepath.Dir(requestPath), policyeval.InputFile), rego.MaxInputBytes)
	out := &responder{w: stdout}
	// A policy that allocates without end is stopped short of the
	// ceiling, with a verdict instead of a crash.
	stop := policyeval.WatchMemory(5*time.Millisecond, func() {
		_ = out.send(policyeval.Response{Error: rego.CodeEvaluationMemoryLimit})
		os.Exit(0)
	})
	defer stop()
	var resp policyeval.Response
	switch {
	case errors.Is(err, errTooLarge):
		resp.Error = rego.CodeInputTooLarge
	case err != nil:
		return fmt.Errorf("reading the input: %w", err)
	default:
		resp = evaluate(ctx, req, doc)
	}
	return out.send(resp)
}

// responder writes the one response, whoever gets there first: the
// evaluation or the memory watch.
type responder struct {
	mu   sync.Mutex
	w    io.Writer
	sent bool
}

func (r *responder) send(resp policyeval.Response) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sent {
		return nil
	}
	r.sent = true
	return json.NewEncoder(r.w).Encode(resp)
}

// evaluate fetches and compiles the bundle while it converts the input,
// then evaluates until the request's deadline.
func evaluate(ctx context.Context, req policyeval.Request, doc []byte) policyeval.Response {
	deadline := time.UnixMilli(req.DeadlineUnixMS)
	fetchCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	type loaded struct {
		policy *engine.Policy
		err    error
	}
	ready := make(chan loaded, 1)
	go func() {
		p, err := loadBundle(fetchCtx, req)
		ready <- loaded{p, err}
	}()
	// While the bundle's fetch waits on the network, this processor parses
	// the capabilities manifest the compiler needs, then converts the
	// input, which the worker built and checked.
	_, _, _ = engine.Capabilities()
	input, inputErr := engine.InputValue(doc)
	bundle := <-ready
	switch {
	case inputErr != nil:
		return failure(inputErr)
	case bundle.err != nil:
		return failure(bundle.err)
	}
	remaining := time.Until(deadline)
	if remaining <= 0 {
		return policyeval.Response{Error: rego.CodeEvaluationTimeout}
	}
	d, err := bundle.policy.Evaluate(ctx, input, remaining)
	if err != nil {
		return failure(err)
	}
	decision, err := json.Marshal(d)
	if err != nil {
		return policyeval.Response{Error: rego.CodeDecisionInvalid}
	}
	return policyeval.Response{Decision: decision}
}

// failure turns an error into its safe code; one without a code (an
// ended context) is a timeout, since the deadline is the only end the
// child knows.
func failure(err error) policyeval.Response {
	code := rego.CodeOf(err)
	switch {
	case code != "":
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		code = rego.CodeEvaluationTimeout
	default:
		code = rego.CodeEvaluatorFailed
	}
	return policyeval.Response{Error: code}
}

// loadBundle fetches the bundle, checks its digest and compiles it.
func loadBundle(ctx context.Context, req policyeval.Request) (*engine.Policy, error) {
	want, err := hex.DecodeString(req.BundleSHA256)
	if err != nil || len(want) != sha256.Size {
		return nil, &rego.EvalError{Code: rego.CodeEvaluatorFailed, Detail: "request has no bundle digest"}
	}
	client, err := httpClient(req.CAFile)
	if err != nil {
		return nil, err
	}
	defer client.CloseIdleConnections()
	body, err := fetchBundle(ctx, client, req.BundleURL)
	if err != nil {
		return nil, err
	}
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], want) {
		return nil, &rego.EvalError{Code: rego.CodeBundleMismatch, Detail: "bundle bytes do not match the snapshot digest"}
	}
	return engine.Load(ctx, bytes.NewReader(body))
}

// Retry pacing of a bundle fetch: a grant is good until its deadline, so
// a refused connection or an unavailable API is tried again until then.
const (
	firstRetry = 50 * time.Millisecond
	maxRetry   = time.Second
)

// httpClient trusts exactly the CA file when one is given. Loading the
// system roots instead would also read every certificate under
// /etc/ssl/certs, which costs a short-lived process tens of milliseconds.
func httpClient(caFile string) (*http.Client, error) {
	transport := &http.Transport{Proxy: nil, ForceAttemptHTTP2: true}
	if caFile != "" {
		pem, err := readBounded(caFile, 4<<20)
		if err != nil {
			return nil, &rego.EvalError{Code: rego.CodeEvaluatorFailed, Detail: "reading the CA file: " + err.Error()}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &rego.EvalError{Code: rego.CodeEvaluatorFailed, Detail: "the CA file holds no certificate"}
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: transport}, nil
}

// fetchBundle reads the bundle at its grant URL, retrying transient
// failures (no connection, 5xx, a body cut short) until ctx ends. A 404 is
// a refused grant and final.
func fetchBundle(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	wait := firstRetry
	for {
		body, retry, err := fetchOnce(ctx, client, url)
		if err == nil || !retry {
			return body, err
		}
		select {
		case <-ctx.Done():
			return nil, &rego.EvalError{Code: rego.CodeEvaluationTimeout, Detail: "no bundle before the deadline: " + err.Error()}
		case <-time.After(wait):
		}
		wait = min(2*wait, maxRetry)
	}
}

func fetchOnce(ctx context.Context, client *http.Client, url string) (body []byte, retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, false, &rego.EvalError{Code: rego.CodeEvaluatorFailed, Detail: "bad bundle URL"}
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, true, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return nil, true, fmt.Errorf("bundle fetch answered %d", resp.StatusCode)
	case resp.StatusCode == http.StatusConflict:
		return nil, false, &rego.EvalError{Code: rego.CodeBundleMismatch, Detail: "the committed bundle is not the snapshotted one"}
	default:
		return nil, false, &rego.EvalError{Code: rego.CodeBundleUnavailable, Detail: fmt.Sprintf("bundle grant refused: %d", resp.StatusCode)}
	}
	if resp.ContentLength > rego.MaxBundleBytes {
		return nil, false, &rego.EvalError{Code: rego.CodeBundleUnavailable, Detail: "bundle is over its bound"}
	}
	body, err = io.ReadAll(io.LimitReader(resp.Body, rego.MaxBundleBytes+1))
	switch {
	case err != nil:
		return nil, true, err
	case len(body) > rego.MaxBundleBytes:
		return nil, false, &rego.EvalError{Code: rego.CodeBundleUnavailable, Detail: "bundle is over its bound"}
	}
	return body, false, nil
}

var errTooLarge = errors.New("file over its bound")

// readBounded reads a whole file of at most limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, errTooLarge
	}
	return b, nil
}
