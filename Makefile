# holdfast: make demo | make test | make chaos | make lint | make bench | make sim
GO ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
PKGS := ./...
## MODULES: every Go module of the repository (the root, the nested modules
## lease/quorum, lease/leaseprom, scheduler/schedprom, and bench); test, lint
## and bench run in each. See docs/modules.md.
MODULES := $(shell git ls-files --cached --others --exclude-standard '*go.mod' | xargs -n1 dirname | sort)
## in-modules runs its argument (a shell command) in every module, naming
## each; it goes on after a failure and fails at the end, naming the modules
## that failed.
in-modules = failed=; for m in $(MODULES); do echo "== module $$m"; (cd $$m && $(1)) || failed="$$failed $$m"; done; \
	if [ -n "$$failed" ]; then echo "== failed in module(s):$$failed"; exit 1; fi

.PHONY: demo test test-short services chaos lint bench sim

## demo: three replicas run daily-settlement; one is frozen past its TTL and
## its late write is rejected. Embedded Redis and store unless REDIS_URL and
## DATABASE_URL are set. DEMO_FLAGS passes flags, e.g. on PostgreSQL alone
## (leases, ledger and sink; no Redis):
##   DATABASE_URL=postgres://root@127.0.0.1:5432/test make demo DEMO_FLAGS='-backend postgres'
## The demo is built, then run (not go run: go run exits 1 when Ctrl-C
## stops it, and make would print an error for a demo that ended cleanly).
DEMO_FLAGS ?=
DEMO_BIN ?= $(or $(TMPDIR),/tmp)/holdfast-settlement-demo
demo:
	$(GO) build -o $(DEMO_BIN) ./examples/settlement
	exec $(DEMO_BIN) $(DEMO_FLAGS)

## services: make a real Redis and PostgreSQL reachable (idempotent).
services:
	bash scripts/services.sh

## test: unit and integration tests (real Redis and PostgreSQL), with -race,
## in every module (the console's browser test, headless Chromium, is one).
test: services
	@$(call in-modules,$(GO) vet $(PKGS) && $(GO) test -race -count=1 -timeout 15m $(PKGS))

## chaos: every fault scenario of package chaos at full scale (CHAOS_SCALE=1:
## real SIGSTOP, SIGKILL, restarts, failovers, latency and resets; about 30
## min, progress on stderr), one "chaos: <name> trials=N violations=0 ...
## control=fired N/N" line each, then the fuzz targets for lease names and
## for job names and partitions, 60 s each. make test runs the same scenarios
## at CHAOS_SCALE=0.05 (the default); CHAOS_SCALE=0.05 make chaos runs that
## scale here too.
CHAOS_SCALE ?= 1
CHAOS_FUZZTIME ?= 60s
chaos: services
	CHAOS_SCALE=$(CHAOS_SCALE) $(GO) test -race -count=1 -timeout 90m -v ./chaos
	$(GO) test -run '^$$' -fuzz '^FuzzLeaseName$$' -fuzztime $(CHAOS_FUZZTIME) ./lease
	$(GO) test -run '^$$' -fuzz '^FuzzJobNameAndPartition$$' -fuzztime $(CHAOS_FUZZTIME) ./scheduler

## sim: the deterministic simulation (package sim, docs/simulation.md):
## seeds for SIM_TIME (default 5m), then the negative controls; prints
## "sim: seeds=N simulated_slots=.. faults=.. violations=.. controls=found
## M/M seeds_per_s=..". Replay one seed: SIM_SEED=<n> go test ./sim/...
## (make test runs a few seeds). No services needed.
SIM_TIME ?= 5m
sim:
	SIM_TIME=$(SIM_TIME) $(GO) test -v -count=1 -timeout 0 -run '^TestSim$$' ./sim

## test-short: unit tests only, no services needed.
test-short:
	@$(call in-modules,HOLDFAST_SKIP_INTEGRATION=1 $(GO) test -race -count=1 $(PKGS))

## lint: gofmt, go vet and staticcheck in every module; the root go.mod has
## no replace directive (go install ...@latest refuses a module with one, and
## the root never requires a nested module; see docs/modules.md); the
## alerting rules (promtool check rules and promtool test rules on
## docs/alerts.yml; scripts/tools.sh installs promtool when missing).
lint:
	@if grep -q '^replace' go.mod; then echo "go.mod: the root module must have no replace directive"; exit 1; fi
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	@$(call in-modules,$(GO) vet $(PKGS) && $(GO) run $(STATICCHECK) $(PKGS))
	bash scripts/tools.sh
	promtool check rules docs/alerts.yml
	cd docs && promtool test rules alerts_test.yml

## bench: benchmarks against the real services: the lease comparison
## (holdfast vs a hand-written baseline, redsync and bsm/redislock, in one
## interleaved run; see bench/README.md), the scheduler at 10,000 slots,
## then the Go benchmarks of every module (the packages that have some:
## scripts/benchpkgs.sh).
## BENCHTIME is the Go benchmarks' -benchtime (300ms: the figures the
## targets are judged by are the bench: lines above; this keeps make bench
## under eight minutes, on a loaded host too).
BENCHTIME ?= 300ms
bench: services
	cd bench && $(GO) run ./cmd/leasebench
	cd bench && $(GO) run ./cmd/leaseir
	cd bench && $(GO) run ./cmd/schedbench
	cd bench && $(GO) run ./cmd/slotir && $(GO) run ./cmd/slotir -cluster
	cd bench && $(GO) run ./cmd/sinkbench
	cd bench && $(GO) run ./cmd/quorumbench
	@$(call in-modules,pkgs=$$(bash $(CURDIR)/scripts/benchpkgs.sh) && { [ -z "$$pkgs" ] || $(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count=1 $$pkgs; })
