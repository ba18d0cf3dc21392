// Command cairn-policy is the policy program a worker runs in a fresh
// sandbox for every policy build and evaluation: the only Cairn binary
// that links the policy engine (OPA), so cairn-api and cairn-worker, which
// never run a policy themselves, stay small.
//
//	cairn-policy build SRC OUT      compile, test and bundle the sources in SRC into OUT
//	cairn-policy evaluate REQUEST   evaluate as REQUEST says; one JSON response on stdout
//
// It needs no configuration, database or secrets, and gets none. A verdict
// on the policy or its input exits 0 with the verdict in its output; a
// broken environment (a missing request, an unwritable OUT) exits 1 with
// the reason on stderr, and anything else is a usage error (2). make build
// puts it beside cairn-worker, where the worker looks for it.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/cairnhq/cairn/jobs/policyprogram"
)

func main() {
	switch {
	case len(os.Args) == 4 && os.Args[1] == "build":
		if err := policyprogram.Build(context.Background(), os.Args[2], os.Args[3]); err != nil {
			fmt.Fprintln(os.Stderr, "policy-build:", err)
			os.Exit(1)
		}
	case len(os.Args) == 3 && os.Args[1] == "evaluate":
		if err := policyprogram.Evaluate(context.Background(), os.Args[2], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "policy-evaluate:", err)
			os.Exit(1)
		}
	default:
		fmt.Fprintln(os.Stderr, "usage: cairn-policy build SRC OUT | cairn-policy evaluate REQUEST")
		os.Exit(2)
	}
}
