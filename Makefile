# blackbox: the two set-up commands are `make demo` and `make test`.
GO ?= go
PKGS := ./...

.PHONY: all test lint bench fuzz demo build deadcode torture

all: lint test

build:
	$(GO) build -o bin/blackbox ./cmd/blackbox

# Every test, race detector on. CI runs exactly this (.ci/run). The example
# module (examples/orders, a module of its own that ./... does not reach) is
# vetted and tested after the root packages.
test: lint
	$(GO) test -race -count=1 -timeout 20m $(PKGS)
	cd examples/orders && $(GO) vet ./... && $(GO) test -race -count=1 -timeout 10m ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

# Unreachable code (golang.org/x/tools/cmd/deadcode), the tests counted as
# callers: prints nothing, or fails listing what it found. What only tests
# and users call is kept on purpose: docs/DEADCODE.md. Not part of `make test`.
DEADCODE ?= $(GO) run golang.org/x/tools/cmd/deadcode@v0.52.0
deadcode:
	@out=$$($(DEADCODE) -test $(PKGS)) || exit 1; \
	if [ -n "$$out" ]; then echo "deadcode found unreachable code:"; echo "$$out"; exit 1; fi

# The benchmark suite beside its floors and peer; writes docs/PERFORMANCE.md.
bench:
	GO=$(GO) bench/run.sh

# Fuzz every reader of untrusted bytes for 30 s each (not in CI).
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzCSVReader -fuzztime=30s -fuzzminimizetime=5s ./store/csvstore
	$(GO) test -run='^$$' -fuzz=FuzzRowDecode -fuzztime=30s -fuzzminimizetime=5s ./store/csvstore
	$(GO) test -run='^$$' -fuzz=FuzzRawRow -fuzztime=30s -fuzzminimizetime=5s ./store/sqlitestore
	$(GO) test -run='^$$' -fuzz='^FuzzLineReader$$' -fuzztime=30s -fuzzminimizetime=5s ./engine/filesource
	$(GO) test -run='^$$' -fuzz=FuzzLineReaderRefused -fuzztime=30s -fuzzminimizetime=5s ./engine/filesource
	$(GO) test -run='^$$' -fuzz=FuzzPointerFile -fuzztime=30s -fuzzminimizetime=5s ./engine/filesource
	$(GO) test -run='^$$' -fuzz=FuzzReport -fuzztime=30s -fuzzminimizetime=5s ./report
	$(GO) test -run='^$$' -fuzz=FuzzParseWorkerStream -fuzztime=30s -fuzzminimizetime=5s ./core
	$(GO) test -run='^$$' -fuzz=FuzzReadToken -fuzztime=30s -fuzzminimizetime=5s ./cmd/cli
	$(GO) test -run='^$$' -fuzz=FuzzAnswers -fuzztime=30s -fuzzminimizetime=5s ./console

demo: build
	./bin/blackbox demo --dir demo-out

# A long soak of the torture harness (docs/GUARANTEES.md, "The torture
# harness"): generated scenarios for TIME, seeds from the time (printed);
# a failing scenario is shrunk, its directory kept under torture-out/ and
# the command that reproduces it printed. `make test` runs a fixed budget
# of 200 scenarios (TestTortureScenarios).
TIME ?= 30m
torture: build
	./bin/blackbox torture --time $(TIME) --parallel 4 --dir torture-out
