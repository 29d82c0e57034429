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

.PHONY: all build run test vet bench fuzz clean deb

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

# The Debian package (bin/ribkeeper_VERSION_ARCH.deb), built with nfpm, pinned
# in tools/go.mod so that it stays out of the daemon's dependencies. Its
# inputs are staged in $(DEB_BUILD): the binary; the unit for /usr/bin and the
# ribkeeper user; the example configuration with the packaged paths (store
# under /var/lib/ribkeeper, socket /run/ribkeeper/ribkeeper.sock), checked
# with check-config; the bash completion; the FastNetMon hook; the
# maintainer scripts. DEB_OUT names the output directory.
DEB_OUT     ?= bin
DEB_BUILD   := $(DEB_OUT)/deb-build
DEB_VERSION ?= $(shell echo '$(VERSION)' | sed -E -e 's/^v([0-9]+\.)/\1/' -e '/^[0-9]+\./!s/^/0.0.0~git/' -e 's/-/+/g')
DEB_ARCH    ?= $(shell $(GO) env GOARCH)

deb: build
	rm -rf $(DEB_BUILD) && mkdir -p $(DEB_BUILD)
	$(GO) build -modfile=tools/go.mod -o $(DEB_BUILD)/nfpm github.com/goreleaser/nfpm/v2/cmd/nfpm
	cp $(BIN) $(DEB_BUILD)/ribkeeper
	sed -e '1i # As packaged by make deb: the binary is /usr/bin/ribkeeper and the service runs as the ribkeeper system user.' \
	    -e 's|/usr/local/bin/ribkeeper|/usr/bin/ribkeeper|g' \
	    -e 's|^DynamicUser=yes$$|User=ribkeeper\nGroup=ribkeeper|' \
	    contrib/systemd/ribkeeper.service >$(DEB_BUILD)/ribkeeper.service
	grep -q '^User=ribkeeper$$' $(DEB_BUILD)/ribkeeper.service
	grep -q '^ExecStart=/usr/bin/ribkeeper serve --config /etc/ribkeeper/ribkeeper.toml$$' $(DEB_BUILD)/ribkeeper.service
	sed -e 's|^path = "./data/ribkeeper.db"|path = "/var/lib/ribkeeper/ribkeeper.db"|' \
	    -e 's|^socket = "./data/ribkeeper.sock"|socket = "/run/ribkeeper/ribkeeper.sock"|' \
	    config.example.toml >$(DEB_BUILD)/ribkeeper.toml
	grep -q '^path = "/var/lib/ribkeeper/ribkeeper.db"' $(DEB_BUILD)/ribkeeper.toml
	grep -q '^socket = "/run/ribkeeper/ribkeeper.sock"' $(DEB_BUILD)/ribkeeper.toml
	$(abspath $(BIN)) check-config --config $(DEB_BUILD)/ribkeeper.toml
	$(abspath $(BIN)) completion bash >$(DEB_BUILD)/ribkeeper.bash
	cp contrib/fastnetmon/ribkeeper-notify.sh README.md packaging/nfpm.yaml packaging/postinst packaging/prerm packaging/postrm $(DEB_BUILD)/
	cp contrib/routers/README.md $(DEB_BUILD)/routers.md
	cd $(DEB_BUILD) && DEB_VERSION='$(DEB_VERSION)' DEB_ARCH=$(DEB_ARCH) \
	    ./nfpm package --config nfpm.yaml --packager deb --target ..

clean:
	rm -rf bin
