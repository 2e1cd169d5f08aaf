# Interlingua build and test. Everything the tests need is installed here,
# at pinned versions, into ./bin (Go tools) and node_modules (npm clients).

GO      ?= go
BIN     := $(CURDIR)/bin
export PATH := $(BIN):$(PATH)

BUF_VERSION             := v1.75.0
PROTOC_GEN_GO_VERSION   := v1.36.12
CONNECT_VERSION         := v1.21.1
NATS_SERVER_VERSION     := v2.15.2
STATICCHECK_VERSION     := v0.8.2

BUF          := $(BIN)/buf-$(BUF_VERSION)
PROTOC_GO    := $(BIN)/protoc-gen-go-$(PROTOC_GEN_GO_VERSION)
PROTOC_CONN  := $(BIN)/protoc-gen-connect-go-$(CONNECT_VERSION)
NATS_SERVER  := $(BIN)/nats-server-$(NATS_SERVER_VERSION)
STATICCHECK  := $(BIN)/staticcheck-$(STATICCHECK_VERSION)

FUZZTIME ?= 10s

.PHONY: conformance conformance-doc conformance-cluster readme-matrix
.PHONY: all build test generate check-generated lint vet staticcheck json-imports fmt-check unit browser-deps node-deps node-test fuzz-short fuzz bench tools clean

all: build

build:
	$(GO) build ./...

## tools: the pinned code generators, servers and linters, built from their Go modules.
tools: $(BUF) $(PROTOC_GO) $(PROTOC_CONN) $(NATS_SERVER) $(STATICCHECK)

$(BUF):
	GOBIN=$(BIN) $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
	cp $(BIN)/buf $@

$(PROTOC_GO):
	GOBIN=$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	cp $(BIN)/protoc-gen-go $@

$(PROTOC_CONN):
	GOBIN=$(BIN) $(GO) install connectrpc.com/connect/cmd/protoc-gen-connect-go@$(CONNECT_VERSION)
	cp $(BIN)/protoc-gen-connect-go $@

$(NATS_SERVER):
	GOBIN=$(BIN) $(GO) install github.com/nats-io/nats-server/v2@$(NATS_SERVER_VERSION)
	cp $(BIN)/nats-server $@

# staticcheck 2026.2.2 is module version v0.8.2.
$(STATICCHECK):
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	cp $(BIN)/staticcheck $@

## generate: regenerate gen/ from proto/.
generate: $(BUF) $(PROTOC_GO) $(PROTOC_CONN)
	$(BIN)/buf generate

## check-generated: fail when gen/ is stale.
check-generated: $(BUF) $(PROTOC_GO) $(PROTOC_CONN)
	@tmp=$$(mktemp -d) && $(BIN)/buf generate -o $$tmp && \
	if ! diff -r gen $$tmp/gen >/dev/null; then \
		diff -r gen $$tmp/gen | head -20; rm -rf $$tmp; \
		echo "gen/ is stale: run 'make generate' and commit"; exit 1; \
	fi; rm -rf $$tmp; echo "gen/ is up to date"

## lint: gofmt, go vet, staticcheck (its default checks, tests included),
## the JSON-imports rule (.ci/json-imports) and buf lint.
lint: $(BUF) fmt-check vet staticcheck json-imports
	$(BIN)/buf lint

fmt-check:
	@bad=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go') | grep -v '^gen/' || true); \
	if [ -n "$$bad" ]; then echo "gofmt needed:"; echo "$$bad"; exit 1; fi

vet:
	$(GO) vet ./...

staticcheck: $(STATICCHECK)
	$(STATICCHECK) ./...

## json-imports: fail for any package importing a JSON library other than
## through internal/json (test files excepted).
json-imports:
	.ci/json-imports

## unit: every Go test, with the race detector.
unit: $(BUF) $(NATS_SERVER) node-deps browser-deps
	$(GO) test -race -timeout 20m ./...

## test: what CI runs.
test: check-generated lint unit node-test fuzz-short conformance
	@echo "make test: all checks passed"

## node-deps: the real npm clients the Go tests drive (pinned by package-lock.json).
node-deps: conformance/clients/agent/node_modules/.package-lock.json
node-deps: conformance/clients/responses/node_modules/.package-lock.json
node-deps: conformance/peers/langgraph/node_modules/.package-lock.json
node-deps: conformance/clients/openai/node_modules/.package-lock.json
node-deps: conformance/clients/anthropic/node_modules/.package-lock.json
node-deps: conformance/clients/claude-code/node_modules/.package-lock.json
node-deps: conformance/clients/codex/node_modules/.package-lock.json

conformance/clients/agent/node_modules/.package-lock.json: conformance/clients/agent/package-lock.json
	npm ci --prefix conformance/clients/agent --no-audit --no-fund

conformance/clients/responses/node_modules/.package-lock.json: conformance/clients/responses/package-lock.json
	npm ci --prefix conformance/clients/responses --no-audit --no-fund

conformance/peers/langgraph/node_modules/.package-lock.json: conformance/peers/langgraph/package-lock.json
	npm ci --prefix conformance/peers/langgraph --no-audit --no-fund

conformance/clients/openai/node_modules/.package-lock.json: conformance/clients/openai/package-lock.json
	npm ci --prefix conformance/clients/openai --no-audit --no-fund

conformance/clients/anthropic/node_modules/.package-lock.json: conformance/clients/anthropic/package-lock.json
	npm ci --prefix conformance/clients/anthropic --no-audit --no-fund

# Claude Code's and Codex's native binaries come from npm itself (an
# optional dependency per platform); Claude Code's postinstall is not
# needed.
conformance/clients/claude-code/node_modules/.package-lock.json: conformance/clients/claude-code/package-lock.json
	npm ci --prefix conformance/clients/claude-code --no-audit --no-fund

conformance/clients/codex/node_modules/.package-lock.json: conformance/clients/codex/package-lock.json
	npm ci --prefix conformance/clients/codex --no-audit --no-fund

## browser-deps: Debian's chromium, for the inspector page's browser test
## (inspect TestPage), when missing. Where there is no apt-get, or no root
## and no password-less sudo, nothing is installed: the test then skips,
## saying why.
browser-deps:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then exit 0; fi; \
	if ! command -v apt-get >/dev/null 2>&1; then echo "browser-deps: no apt-get: chromium not installed (inspect TestPage will skip)"; exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then sudo=; elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"; \
	else echo "browser-deps: not root and no password-less sudo: chromium not installed (inspect TestPage will skip)"; exit 0; fi; \
	$$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends chromium \
		|| echo "browser-deps: apt-get install chromium failed (inspect TestPage will skip)"

# The Node suites run inside go test (adapters/agent TestSDK); this target
# only makes sure their packages are installed first.
node-test: node-deps

## fuzz-short: every fuzz target for $(FUZZTIME) (make fuzz FUZZTIME=10m for long runs);
## shrinking a new input is capped at 200 runs, which otherwise took most
## of a short run on large seeds (adapters/openai: 21 execs in 15 s).
## A target that fails without writing a failing input to testdata/fuzz is
## run once more: Go 1.26's fuzz coordinator can report its own -fuzztime
## deadline as "context deadline exceeded" when the machine stalls
## (go.dev/issue/75804, fixed in Go 1.27). A found input, or a failure that
## happens again (a seed, a build error), fails at once.
fuzz-short:
	@for pkg in $$($(GO) list ./...); do \
		dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
		for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/^func //'); do \
			echo "fuzz $$pkg $$f"; \
			inputs=$$(ls $$dir/testdata/fuzz/$$f 2>/dev/null | wc -l); \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 200x $$pkg && continue; \
			[ "$$(ls $$dir/testdata/fuzz/$$f 2>/dev/null | wc -l)" = "$$inputs" ] || exit 1; \
			echo "fuzz $$pkg $$f: failed with no failing input written; once more (go.dev/issue/75804)"; \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 200x $$pkg || exit 1; \
		done; \
	done

fuzz:
	$(MAKE) fuzz-short FUZZTIME=10m

## bench: converter benchmarks (-benchmem) and the standard load matrix -> docs/benchmarks.md
bench:
	@mkdir -p $(BIN)
	$(GO) test -p 1 -run '^$$' -bench . -benchmem -count 1 ./adapters/... ./canonical/... ./internal/... > $(BIN)/bench-converters.txt || { cat $(BIN)/bench-converters.txt; exit 1; }
	$(GO) build -o $(BIN)/interlingua ./cmd/interlingua
	$(BIN)/interlingua bench --report docs/benchmarks.md --converters $(BIN)/bench-converters.txt --profile-dir bin/bench-profiles

clean:
	rm -rf $(BIN)

## conformance: the full bridge matrix through the CLI; fails when docs/conformance.md is stale.
conformance:
	@set -e; tmp=$$(mktemp); trap 'rm -f $$tmp' EXIT; \
	$(GO) run ./cmd/interlingua conformance --mode bridge --report markdown > $$tmp; \
	if ! diff -q docs/conformance.md $$tmp >/dev/null; then diff docs/conformance.md $$tmp | head -20; \
		echo "docs/conformance.md is stale: run 'make conformance-doc'"; exit 1; fi; \
	echo "conformance: bridge matrix passed, docs/conformance.md up to date"

conformance-doc:
	$(GO) run ./cmd/interlingua conformance --mode bridge --report markdown > docs/conformance.md

conformance-cluster:
	$(GO) run ./cmd/interlingua conformance --mode cluster

## readme-matrix: splice the generated matrix between the README markers.
readme-matrix:
	@tmp=$$(mktemp) && $(GO) run ./cmd/interlingua conformance --report matrix > $$tmp && \
	awk -v f=$$tmp '/<!-- conformance-matrix:start -->/{print; while ((getline l < f) > 0) print l; skip=1; next} /<!-- conformance-matrix:end -->/{skip=0} !skip' README.md > README.md.new && mv README.md.new README.md; rm -f $$tmp
