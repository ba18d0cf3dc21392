# Cairn's commands. The two that matter: `make run` and `make test`.
GO      ?= go
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X github.com/cairnhq/cairn/api/platform/buildinfo.Version=$(VERSION) \
           -X github.com/cairnhq/cairn/api/platform/buildinfo.Revision=$(REVISION)
BINARIES := ./api/cmd/cairn-api ./api/cmd/cairn-mcp ./jobs/cmd/cairn-worker ./jobs/cmd/cairn-sandbox-exec ./jobs/cmd/cairn-policy \
            ./bff/cmd/cairn-bff ./e2e/cmd/cairn-dev

.PHONY: build run test test-compat bench chaos fuzz contract deps deps-test tools clean

## build: compile cairn-api, cairn-mcp, cairn-worker (with cairn-sandbox-exec, which its sandboxes start through,
##        and cairn-policy, the policy program its sandboxes run), cairn-bff (and the cairn-dev helper) into bin/
##        Static (CGO_ENABLED=0, as compose.yaml builds them) and with the tag grpcnotrace: gRPC, which
##        gocloud.dev and the OTLP exporter link for its types alone, would otherwise link x/net/trace,
##        whose init renders html/template; template execution looks methods up by name, and then the
##        linker keeps every exported method of every type (the whole S3 client among them), which made
##        each binary ~20 MB larger and an idle api + worker ~15 MiB more resident (docs/benchmarks.md).
build:
	CGO_ENABLED=0 $(GO) build -tags grpcnotrace -ldflags "$(LDFLAGS)" -o bin/ $(BINARIES)
	@# A worker refuses a cairn-sandbox-exec or cairn-policy others could
	@# replace (a root worker's sandboxes start the one as root; the other's
	@# decisions gate runs), whatever the umask was.
	@chmod go-w bin bin/*

## run: private PostgreSQL under .data/, migrate, bootstrap, then api + worker + bff in the foreground
run: deps build tools
	./bin/cairn-dev run

## test: go vet + go test -race (unit, integration, end-to-end) against a throwaway cluster,
##       every fuzz target briefly, then go-tfe's own integration tests against a real cairn-api
test: deps-test build tools
	./bin/cairn-dev test
	./bin/cairn-dev compat

## test-compat: go-tfe v1.103.0's own integration tests (workspaces, locks, state versions) against cairn-api
test-compat: deps-test build tools
	./bin/cairn-dev compat

## bench: the benchmark harness against a throwaway cluster; every phase, or only some:
##        `make bench ONLY=scale,concurrency`, `make bench -only scale` or `make bench scale concurrency`.
##        GNU make reads `-only` as its own `-o nly` (harmless) and the phase names as goals, so with `bench`
##        among the goals every other goal is taken as a phase name: passed on as -only and given an empty rule.
comma := ,
empty :=
space := $(empty) $(empty)
BENCH_ONLY = $(or $(ONLY),$(subst $(space),$(comma),$(strip $(filter-out bench,$(MAKECMDGOALS)))))
bench: deps build tools
	./bin/cairn-dev bench $(if $(BENCH_ONLY),-only $(BENCH_ONLY))
ifneq ($(filter bench,$(MAKECMDGOALS)),)
$(filter-out bench,$(MAKECMDGOALS)):
	@:
endif

## chaos: the crash drill at length: 50 managed runs while the API, the worker and PostgreSQL are SIGKILLed at
##        random (CAIRN_CHAOS_SEED replays a schedule; `make test` runs it with a few runs)
CHAOS_RUNS ?= 50
chaos: deps build tools
	CAIRN_CHAOS_RUNS=$(CHAOS_RUNS) ./bin/cairn-dev test ./e2e/ -run TestCrashDrill

## fuzz: every Go fuzz target in turn for FUZZTIME each (default 30s); `make test` runs each for 2s
FUZZTIME ?= 30s
fuzz: build
	./bin/cairn-dev fuzz -fuzztime $(FUZZTIME)

## tools: build the pinned OpenTofu (1.10.6) into .tools/toolchains/tofu/ with its SHA256SUMS, versitygw
##        (1.8.0, the S3-compatible store tests use) into .tools/versitygw/, and Terraform 1.5.7 (the registry
##        tests' second CLI) into .tools/toolchains/terraform/, and the sandboxes' managed base (pinned Debian
##        packages, with its version and digest in BASE.json) into .tools/sandbox-base/
tools: build
	./bin/cairn-dev tools

## contract: regenerate contracts/openapi.json from the code
contract:
	$(GO) test ./api/v1 -run TestContractIsCommitted -update

## deps: install the machine packages running Cairn needs, when missing (PostgreSQL, bubblewrap, util-linux);
##       `make run` needs nothing more
deps:
	@if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 && ! command -v postgres >/dev/null 2>&1; then \
		echo "==> installing PostgreSQL server binaries"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
	fi
	@# Sandboxes run tofu in Linux namespaces through bubblewrap (a worker
	@# without them refuses to run phases); rlimits and a root worker's switch
	@# to each sandbox's own user are cairn-sandbox-exec's. The sandbox tests
	@# use util-linux's setpriv to act as another user.
	@if ! command -v bwrap >/dev/null 2>&1 || ! command -v setpriv >/dev/null 2>&1; then \
		echo "==> installing bubblewrap and util-linux"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap util-linux >/dev/null; \
	fi
	@# The sandboxes' managed base (make tools) is assembled from these
	@# packages' files; a slim image may lack some of them.
	@if ! dpkg-query -W dash coreutils mawk sed grep findutils libc6 ca-certificates >/dev/null 2>&1; then \
		echo "==> installing the sandbox base's packages"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dash coreutils mawk sed grep findutils libc6 ca-certificates >/dev/null; \
	fi

## deps-test: deps, plus what only the tests need (Chromium for the dashboard tests, Node.js for the agent tests)
deps-test: deps
	@# The dashboard's end-to-end tests drive a headless Chromium (chromedp).
	@if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1 && \
		! command -v google-chrome >/dev/null 2>&1 && [ -z "$$CAIRN_CHROMIUM" ]; then \
		echo "==> installing Chromium"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	fi
	@# The agent end-to-end tests drive cairn-mcp with the TypeScript MCP SDK.
	@if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then \
		echo "==> installing Node.js"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; \
	fi

clean:
	rm -rf bin
