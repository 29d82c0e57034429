# ribkeeper — see README.md. `make run` and `make test` work on a fresh machine
# once Go and a C compiler (for SQLite) are present; `.ci/run` installs the
# Debian packages the tests need (bird2, postgresql, frr, exabgp, chromium).

GO      ?= go
BIN     := bin/ribkeeper
CONFIG  ?= config.example.toml
FUZZTIME ?= 20s

.PHONY: all build run test vet bench fuzz clean

all: build

build:
	$(GO) build -o $(BIN) .

# Builds and serves with the example configuration (SQLite under ./data/,
# BGP on 127.0.0.1:1790, control socket ./data/ribkeeper.sock).
run: build
	mkdir -p data
	./$(BIN) serve --config $(CONFIG)

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

# All tests: unit tests, the fuzz seed corpora, the store conformance suite on
# SQLite and a PostgreSQL started by the harness, and the end-to-end tests
# against a real BIRD.
test: vet
	$(GO) test -count=1 -timeout 40m ./...

# Benchmarks, side by side with raw GoBGP; writes BENCHMARKS.md from the run.
bench:
	./scripts/bench.sh

# Bounded fuzzing of every fuzz target (FUZZTIME each).
fuzz:
	@for t in $$($(GO) test -list 'Fuzz.*' ./flowspec/ | grep '^Fuzz'); do \
		echo "== $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) ./flowspec/ || exit 1; \
	done

clean:
	rm -rf bin
