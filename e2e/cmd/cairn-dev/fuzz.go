package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// briefFuzzTime is how long `make test` fuzzes each target: long enough to
// mutate past the seeds, short enough that every target fits in about a
// minute and a half.
const briefFuzzTime = 2 * time.Second

// fuzzTarget is one Go fuzz function and the package it lives in.
type fuzzTarget struct {
	pkg  string // ./api/archive
	name string // FuzzExtract
}

// fuzzResult is what one fuzzing session reported.
type fuzzResult struct {
	fuzzTarget
	execs, interesting string
	elapsed            time.Duration
	failure            string // "" when the session passed
}

var (
	fuzzFunc     = regexp.MustCompile(`(?m)^func (Fuzz\w+)\(f \*testing\.F\)`)
	fuzzProgress = regexp.MustCompile(`execs: (\d+) .*new interesting: (\d+)`)
	fuzzFailure  = regexp.MustCompile(`Failing input written to (\S+)`)
)

// fuzzCommand is `cairn-dev fuzz`: every fuzz target in turn, each for
// -fuzztime (FUZZTIME, default 30s).
func fuzzCommand(ctx context.Context, args []string) error {
	flags := flag.NewFlagSet("fuzz", flag.ExitOnError)
	fuzzTime := flags.Duration("fuzztime", envDuration("FUZZTIME", 30*time.Second), "how long to fuzz each target")
	minimize := flags.Duration("minimize", 10*time.Second, "how long to minimize each new interesting input")
	parallel := flags.Int("parallel", 0, "fuzzing workers per target (0: GOMAXPROCS)")
	only := flags.String("only", "", "comma-separated target names to run")
	_ = flags.Parse(args)
	targets, err := findFuzzTargets(".")
	if err != nil {
		return err
	}
	if *only != "" {
		names := strings.Split(*only, ",")
		targets = slices.DeleteFunc(targets, func(t fuzzTarget) bool { return !slices.Contains(names, t.name) })
	}
	return runFuzzTargets(ctx, targets, *fuzzTime, *minimize, *parallel)
}

// findFuzzTargets lists the fuzz functions in the module's test files,
// so a new target runs without being registered anywhere.
func findFuzzTargets(root string) ([]fuzzTarget, error) {
	var targets []fuzzTarget
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "bin" || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range fuzzFunc.FindAllSubmatch(src, -1) {
			targets = append(targets, fuzzTarget{pkg: "./" + filepath.ToSlash(filepath.Dir(path)), name: string(m[1])})
		}
		return nil
	})
	slices.SortFunc(targets, func(a, b fuzzTarget) int { return strings.Compare(a.pkg+"."+a.name, b.pkg+"."+b.name) })
	return targets, err
}

// runFuzzTargets fuzzes each target in turn (go test fuzzes one target
// per invocation), prints a table of executions per target, and fails if
// any target found a failing input.
func runFuzzTargets(ctx context.Context, targets []fuzzTarget, fuzzTime, minimize time.Duration, parallel int) error {
	if len(targets) == 0 {
		return errors.New("no fuzz targets found")
	}
	fmt.Printf("==> fuzzing %d targets for %s each\n", len(targets), fuzzTime)
	var results []fuzzResult
	for _, t := range targets {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r := fuzzOne(ctx, t, fuzzTime, minimize, parallel)
		if r.failure == "(see output)" && ctx.Err() == nil {
			// A run that failed without writing a failing input (Go's
			// fuzzer sometimes stops a worker at its deadline with
			// "context deadline exceeded") gets one more try; a real
			// finding writes its input, which the retry replays and
			// fails on again.
			fmt.Printf("==> %s failed without a failing input; running it once more\n", t.name)
			r = fuzzOne(ctx, t, fuzzTime, minimize, parallel)
		}
		results = append(results, r)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tPACKAGE\tEXECS\tNEW INTERESTING\tTIME\tRESULT")
	failed := 0
	for _, r := range results {
		result := "ok"
		if r.failure != "" {
			result, failed = "FAIL "+r.failure, failed+1
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.name, r.pkg, r.execs, r.interesting, r.elapsed.Round(time.Second), result)
	}
	_ = tw.Flush()
	if failed > 0 {
		return fmt.Errorf("%d of %d fuzz targets failed", failed, len(results))
	}
	return nil
}

func fuzzOne(ctx context.Context, t fuzzTarget, fuzzTime, minimize time.Duration, parallel int) fuzzResult {
	args := []string{"test", "-run=^$", "-fuzz=^" + t.name + "$", "-fuzztime=" + fuzzTime.String(),
		"-fuzzminimizetime=" + minimize.String()}
	if parallel > 0 {
		args = append(args, fmt.Sprintf("-parallel=%d", parallel))
	}
	args = append(args, t.pkg)
	fmt.Printf("==> go %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, "go", args...)
	var out bytes.Buffer
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Progress goes to the terminal as it comes, prefixed with the
		// target, and is kept for the summary.
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			fmt.Printf("%s | %s\n", t.name, sc.Text())
		}
	}()
	started := time.Now()
	err := cmd.Run()
	pw.Close()
	<-done
	// No progress line: the time went on replaying the corpus.
	r := fuzzResult{fuzzTarget: t, execs: "0 (corpus only)", interesting: "-", elapsed: time.Since(started)}
	if m := fuzzProgress.FindAllStringSubmatch(out.String(), -1); len(m) > 0 {
		r.execs, r.interesting = m[len(m)-1][1], m[len(m)-1][2]
	}
	if err != nil {
		r.failure = "(see output)"
		if m := fuzzFailure.FindStringSubmatch(out.String()); m != nil {
			r.failure = filepath.Join(t.pkg, m[1])
		}
	}
	return r
}

func envDuration(name string, fallback time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return fallback
}
