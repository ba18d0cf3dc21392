package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/cairnhq/cairn/api/plandiff/plandifftest"
	"github.com/cairnhq/cairn/api/policy"
	"github.com/cairnhq/cairn/api/policy/rego"
	"github.com/cairnhq/cairn/e2e/devstack"
)

// benchCorpus is the e2e corpus's publishing sets, repeated to ten
// attachments as a run would evaluate them.
var benchCorpus = []string{"require-tags", "limit-destroy", "no-sensitive-leak", "advisory-naming", "always-pass"}

func corpusDir(name string) string { return filepath.Join("e2e", "testdata", "policies", name) }

// benchPolicyEvaluation times the policy stage of a 5,000-resource plan
// against ten attachments: building the sanitized input from the plan
// JSON, converting it once, and ten evaluations. The baseline is decoding
// the same plan JSON with encoding/json, the least any reader pays.
func benchPolicyEvaluation(rounds int) error {
	ctx := context.Background()
	var policies []*rego.Policy
	for i := 0; i < 10; i++ {
		var bundle, results bytes.Buffer
		if _, err := rego.Build(ctx, corpusDir(benchCorpus[i%len(benchCorpus)]), &bundle, &results); err != nil {
			return fmt.Errorf("building %s: %w", benchCorpus[i%len(benchCorpus)], err)
		}
		p, err := rego.Load(ctx, &bundle)
		if err != nil {
			return err
		}
		policies = append(policies, p)
	}
	loaders := make([]policy.Loader, len(policies))
	for i, p := range policies {
		loaders[i] = func(context.Context) (*rego.Policy, error) { return p, nil }
	}
	var planBuf bytes.Buffer
	if err := plandifftest.TaggedPlanJSON(&planBuf, 5000); err != nil {
		return err
	}
	plan := planBuf.Bytes()
	meta := rego.InputMeta{RunID: "run_bench", Kind: "manual", RepositoryID: "cfg_bench", WorkspaceID: "ws_bench",
		WorkspaceMetadata: map[string]any{"name": "bench"}}
	var build, parse, eval, total, baseline []float64
	findings := 0
	for round := 0; round <= rounds; round++ {
		start := time.Now()
		doc, err := rego.BuildInput(ctx, bytes.NewReader(plan), meta)
		if err != nil {
			return err
		}
		built := time.Now()
		input, err := rego.ParseInput(doc)
		if err != nil {
			return err
		}
		parsed := time.Now()
		findings = 0
		for _, o := range policy.EvaluateAll(ctx, input, 10*time.Second, loaders) {
			if o.Err != nil {
				return o.Err
			}
			findings += len(o.Decision.Findings)
		}
		done := time.Now()
		var decoded any
		if err := json.Unmarshal(plan, &decoded); err != nil {
			return err
		}
		decodedAt := time.Since(done)
		if round == 0 {
			continue
		}
		build, parse, eval = append(build, ms64(built.Sub(start))), append(parse, ms64(parsed.Sub(built))), append(eval, ms64(done.Sub(parsed)))
		total, baseline = append(total, ms64(done.Sub(start))), append(baseline, ms64(decodedAt))
	}
	fmt.Printf("policy evaluation, 5,000 resource changes x 10 attachments (%.1f MB plan JSON), median of %d rounds:\n",
		float64(len(plan))/1e6, rounds)
	fmt.Printf("  whole stage %7.1f ms  [target < 1000 ms]  (decoding the plan JSON alone %7.1f ms, x%.2f)\n",
		median(total), median(baseline), median(total)/median(baseline))
	fmt.Printf("    build input %7.1f ms, convert once %7.1f ms, 10 evaluations %7.1f ms (%d findings, %d at a time)\n",
		median(build), median(parse), median(eval), findings, runtime.GOMAXPROCS(0))
	return nil
}

// benchPolicyBuild times publication of a small set through the service
// (upload, sandboxed build, sealed outputs, verified completion) against
// building the same set in-process.
func benchPolicyBuild(dbURL string, rounds int) error {
	m, err := startManagedStack(dbURL, "policy")
	if err != nil {
		return err
	}
	defer m.stop()
	api, c, session := m.api, m.api.Client, m.session
	var set struct{ ID string }
	if _, err := v1(c, http.MethodPost, api.URL+"/v1/policy-sets", session, jsonBody(map[string]string{"name": "require-tags"}), "application/json", &set); err != nil {
		return err
	}
	archive, err := corpusArchive("require-tags")
	if err != nil {
		return err
	}
	var published, direct []float64
	for round := 0; round <= rounds; round++ {
		start := time.Now()
		var v struct{ ID, Status string }
		if _, err := v1(c, http.MethodPost, api.URL+"/v1/workspaces/"+m.workspace+"/policy-sets/"+set.ID+"/versions", session, archive,
			"application/gzip", &v); err != nil {
			return err
		}
		for v.Status == "pending" {
			time.Sleep(10 * time.Millisecond)
			if _, err := v1(c, http.MethodGet, api.URL+"/v1/policy-versions/"+v.ID, session, nil, "", &v); err != nil {
				return err
			}
			if time.Since(start) > 2*time.Minute {
				return fmt.Errorf("policy version %s stayed pending", v.ID)
			}
		}
		if v.Status != "published" {
			return fmt.Errorf("policy version %s is %s", v.ID, v.Status)
		}
		elapsed := time.Since(start)
		began := time.Now()
		if _, err := rego.Build(context.Background(), corpusDir("require-tags"), io.Discard, io.Discard); err != nil {
			return err
		}
		if round > 0 {
			published, direct = append(published, ms64(elapsed)), append(direct, ms64(time.Since(began)))
		}
	}
	fmt.Printf("policy build of a small set (require-tags: 2 modules, 10 tests), median of %d rounds:\n", rounds)
	fmt.Printf("  upload -> published %7.1f ms  (in-process compile+test+bundle %7.1f ms, x%.2f)\n",
		median(published), median(direct), median(published)/median(direct))
	return nil
}

func corpusArchive(name string) ([]byte, error) {
	entries, err := os.ReadDir(corpusDir(name))
	if err != nil {
		return nil, err
	}
	files := map[string]string{}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".rego") {
			body, err := os.ReadFile(filepath.Join(corpusDir(name), e.Name()))
			if err != nil {
				return nil, err
			}
			files[e.Name()] = string(body)
		}
	}
	return devstack.TarGz(files), nil
}
