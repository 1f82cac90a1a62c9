# Temporal-driven Deployment controller. `make dev` runs it on the embedded local stack;
# `make test` runs the unit, workflow and end-to-end tests. See README.md.

SHELL := /bin/bash
GO    ?= go
BIN   := $(CURDIR)/bin
# The version the binaries report (worker --version, starter version): a v* tag at HEAD, else
# the main module's version in Go's build info, else 0.1.0-dev (internal/version). VERSION=0.1.0 make build.
VERSION ?= $(shell git describe --tags --exact-match --match 'v*' 2>/dev/null | sed 's/^v//')
LDFLAGS := -X github.com/temporal-rollout/rollout/internal/version.Version=$(VERSION)
# Where hack/tools.sh keeps the pinned stack binaries (outside the clone, reused); the one
# setting for hack/tools.sh, hack/upstream-e2e.sh, make dev and the tests (ROLLOUT_TOOLS_CACHE,
# its old name, is still read).
export ROLLOUT_TOOLS ?= $(or $(ROLLOUT_TOOLS_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/temporal-rollout/tools)

.PHONY: all tools tools-core build dev test test-unit test-e2e test-e2e-cluster-part test-cluster lint bench chaos upstream-e2e clean

all: build

## tools: build the pinned stack the tests use (cached): Temporal CLI, etcd, Kubernetes components,
## kubectl, kwok, and for the tests also Prometheus and PostgreSQL (Debian packages, apt-get),
## the Temporal server and Traefik (the Gateway API data plane of TestTrafficDataPlane).
tools:
	@hack/tools.sh >/dev/null

## tools-core: only what `make dev` runs (Temporal CLI, etcd, Kubernetes components, kubectl,
## kwok): no Debian packages (Prometheus, PostgreSQL), no Temporal server or Traefik build.
tools-core:
	@hack/tools.sh core >/dev/null

## build: the worker and starter binaries into ./bin.
build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/worker ./worker
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/starter ./starter
	$(GO) build -o $(BIN)/devstack ./hack/devstack

## dev: start the local stack plus our worker and watcher; Ctrl-C stops everything.
dev: tools-core build
	$(BIN)/devstack --dir $(CURDIR)/.dev --bin $(BIN)

## test: unit and workflow tests, then end-to-end tests on the real stack.
test: tools test-unit test-e2e test-e2e-cluster-part

test-unit:
	$(GO) test -count=1 ./...

test-e2e:
	$(GO) test -tags e2e -count=1 -p 1 -timeout 40m -v ./e2e/ ./hack/bench/ 2>&1 | tee $(CURDIR)/e2e.out | grep -E '^(=== RUN|--- |\s+\S+_test\.go|ok|FAIL|PASS|panic)'; exit $${PIPESTATUS[0]}

# The part of the suite that `make test` also runs on the Temporal server on PostgreSQL.
CLUSTER_PART := ^(TestTaskQueueOnePartition|TestRollingUpdate|TestRollback|TestWorkerCrash|TestTemporalRestart|TestStepsAbort|TestStepsTimedPauseSurvivesWorkerKill|TestChaos)$$
test-e2e-cluster-part:
	E2E_TEMPORAL=cluster $(GO) test -tags e2e -count=1 -p 1 -timeout 20m -v -run '$(CLUSTER_PART)' ./e2e/ 2>&1 | tee $(CURDIR)/e2e-cluster.out | grep -E '^(=== RUN|--- |\s+\S+_test\.go|ok|FAIL|PASS|panic)'; exit $${PIPESTATUS[0]}

## test-cluster: the whole end-to-end suite on a production-like Temporal: the Temporal server
## (v1.29.1, built from Go modules) on Debian's PostgreSQL 15 with 4 history shards.
## `E2E_TEMPORAL=cluster make chaos` runs the full chaos run there.
test-cluster: tools
	E2E_TEMPORAL=cluster $(GO) test -tags e2e -count=1 -p 1 -timeout 40m -v ./e2e/ 2>&1 | tee $(CURDIR)/e2e-cluster.out | grep -E '^(=== RUN|--- |\s+\S+_test\.go|ok|FAIL|PASS|panic)'; exit $${PIPESTATUS[0]}

## chaos: the full chaos run (issue 10): 50 Deployments x 10 replicas on two workers and two
## watchers with SIGKILLs, a kube-apiserver and a Temporal restart and a conflicting writer;
## writes chaos-out/report.md. `make test` runs a short version (TestChaos at its defaults).
chaos: tools
	CHAOS_DEPLOYMENTS=$${CHAOS_DEPLOYMENTS:-50} CHAOS_REPLICAS=$${CHAOS_REPLICAS:-10} CHAOS_DURATION=$${CHAOS_DURATION:-60s} \
		$(GO) test -tags e2e -count=1 -p 1 -timeout 30m -v -run '^TestChaos$$' ./e2e/ 2>&1 | tee $(CURDIR)/chaos.out | grep -E '^(=== RUN|--- |\s+\S+_test\.go|ok|FAIL|PASS|panic)'; exit $${PIPESTATUS[0]}

## upstream-e2e: Kubernetes' own [sig-apps] Deployment e2e specs, built-in controller vs ours,
## each spec's time side by side (hack/upstream-e2e.sh; UPSTREAM_FLAGS="--budget 200/300").
upstream-e2e:
	hack/upstream-e2e.sh $(UPSTREAM_FLAGS)

## lint: gofmt, go vet, staticcheck and workflowcheck.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/ ./hack/bench/
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.7.0 ./...
	$(GO) run go.temporal.io/sdk/contrib/tools/workflowcheck@v0.6.0 -config workflowcheck.config.yaml ./workflows/... ./release/...

## bench: the same workloads with the built-in Deployment controller and with ours, each on a
## fresh local stack; prints a table, writes bench-out/, BENCHMARKS.md and
## docs/bench-progress.png. BENCH_FLAGS=--quick is a one-Deployment smoke run.
BENCH_FLAGS ?=
bench: tools build
	$(GO) build -o $(BIN)/bench ./hack/bench
	$(BIN)/bench --bin $(BIN) $(BENCH_FLAGS)

clean:
	rm -rf $(BIN) .dev e2e.out e2e-cluster.out
