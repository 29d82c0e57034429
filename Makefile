# ribkeeper — see README.md. `make run` and `make test` work on a fresh machine
# once Go and a C compiler (for SQLite) are present; `.ci/run` installs the
# Debian packages the tests need (bird2, postgresql, frr, exabgp, chromium).

GO      ?= go
BIN     := bin/ribkeeper
CONFIG  ?= config.example.toml
FUZZTIME ?= 20s

# What `ribkeeper version` and the ribkeeper_build_info metric report, set
# at link time (see buildinfo/). Outside a git checkout (a source archive)
# the commit is "none" and the version "unknown" unless VERSION is given.
# SOURCE_DATE_EPOCH, if set, fixes the build date (reproducible builds).
GIT_VERSION := $(shell git describe --tags --always --dirty 2>/dev/null)
GIT_COMMIT  := $(shell git rev-parse HEAD 2>/dev/null)
VERSION    ?= $(or $(GIT_VERSION),unknown)
COMMIT     ?= $(or $(GIT_COMMIT),none)
BUILD_DATE ?= $(shell date -u $(if $(SOURCE_DATE_EPOCH),-d @$(SOURCE_DATE_EPOCH)) +%Y-%m-%dT%H:%M:%SZ)
BUILDINFO  := github.com/ribkeeper/ribkeeper/buildinfo
LDFLAGS    := -X $(BUILDINFO).version=$(VERSION) -X $(BUILDINFO).commit=$(COMMIT) -X $(BUILDINFO).date=$(BUILD_DATE)

.PHONY: all build run test vet bench fuzz clean

all: build

build:
	@test -n "$(GIT_COMMIT)" || echo "not a git checkout: the binary will report commit none and version $(VERSION) (make VERSION=... names it)"
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) .

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
