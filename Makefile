# revgate — see README.md.
GO        ?= go
BIN       := bin/revgate
RUN_ROOT  ?= .run

.PHONY: all build run test bench lint fmt clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN) ./cmd/revgate

# The embedded default: installs examples/ as revision 1 under $(RUN_ROOT) and
# supervises the gateway and its startup monitor.
run: build
	./$(BIN) run --root $(RUN_ROOT)

# Everything CI runs: dependencies, lint, unit, integration, e2e and fuzz tests.
test:
	bash hack/test.sh

# Go benchmarks, then the side-by-side comparison with nginx, haproxy and caddy.
bench: build
	$(GO) test -run '^$$' -bench . -benchmem ./...
	bash hack/bench/run.sh

# gofmt, go vet, go mod tidy -diff and staticcheck (installed at a pinned
# version into ~/.cache/revgate by hack/lint.sh).
lint:
	bash hack/lint.sh

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin $(RUN_ROOT)
