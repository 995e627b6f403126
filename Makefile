# snofactory: `make demo` runs the whole pipeline on the demo blueprint; `make test` runs every test.
# Both install what they need first (`make deps`, Debian, as root).

SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
export CGO_ENABLED := 0
# containers/image and containers/storage build static with these tags.
export GOFLAGS := -tags=containers_image_openpgp,exclude_graphdriver_btrfs
GO ?= go
BIN := build/snofactory
TEST_TIMEOUT ?= 25m
# A count, not a duration: duration-bounded fuzz runs can fail spuriously at their deadline.
FUZZTIME ?= 3000x

.PHONY: all deps build test unit e2e fuzz bench demo lint clean image kube-node

all: build

deps:
	@./.ci/deps
	@$(GO) mod download
	@./test/kubeapi/build.sh
	@./test/cosign/build.sh
	@./test/skopeo/build.sh

build: $(BIN)

# test/kube's single-node Kubernetes and Tekton, built once into build/kube/node.
kube-node:
	@./test/kube/build.sh

# The binary depends on every Go file; go's own cache makes a no-op rebuild fast.
$(BIN): $(shell find . -name '*.go' -not -path './build/*' 2>/dev/null) go.mod go.sum
	@mkdir -p build
	$(GO) build -trimpath -ldflags='-s -w' -o $@ ./cmd/snofactory

-include test/conformance/conformance.mk

# Every test: unit tests, end-to-end tests with real qemu/registry/ignition, and a short fuzz run.
# deps runs first even under make -j: everything after it needs the toolchain it installs.
# The Debian root of the systemd conformance OS (mostly download and unpack) is made while
# the Kubernetes node binaries compile (CPU), so the two one-time builds overlap.
test: deps
	@$(MAKE) --no-print-directory -j3 build conformance-iso conformance-systemd lint kube-node
	$(GO) test -timeout $(TEST_TIMEOUT) -p 2 ./...
	@$(MAKE) --no-print-directory fuzz

unit: build
	$(GO) test -short ./...

e2e: deps
	@$(MAKE) --no-print-directory -j3 build conformance-iso conformance-systemd kube-node
	$(GO) test -timeout $(TEST_TIMEOUT) -p 1 ./test/...

# Each fuzz target runs for FUZZTIME; the seed corpora already run in `go test`.
# The targets are found in the sources: asking `go test -list` of every package linked and
# ran the 79 packages' test binaries (minutes of CPU) to find the few packages with one.
# A fuzz build instruments every package its test binary links, so a target is as dear as
# its imports: FuzzLoad (the blueprint loader; its test binary links over 1000 packages)
# took minutes to compile for seconds of fuzzing. Its seed corpus runs in `go test`; hostile
# YAML is fuzzed at the layer under it, strictyaml's FuzzDecode. `FUZZ_SKIP=` fuzzes it too.
FUZZ_SKIP ?= FuzzLoad
fuzz:
	@set -e; for file in $$(git ls-files '*_test.go' | xargs grep -l '^func Fuzz'); do \
	  pkg=./$$(dirname $$file); \
	  for f in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*\*testing\.F).*/\1/p' $$file); do \
	    case " $(FUZZ_SKIP) " in *" $$f "*) echo "fuzz $$pkg $$f: seed corpus only (FUZZ_SKIP)"; continue;; esac; \
	    echo "fuzz $$pkg $$f ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg >/dev/null || { echo "fuzz $$f failed: rerun: go test -run '^$$' -fuzz '^$$f$$' $$pkg"; exit 1; }; \
	  done; \
	done

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go') 2>/dev/null); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# BENCH lines: ours vs a baseline measured in the same run.
bench: deps
	@$(MAKE) --no-print-directory build conformance-iso kube-node
	$(GO) run ./test/bench

# The demo runs offline: demoenv serves the demo's extra image from a local registry on a free
# port and hands the build a copy of the blueprint naming it (the seed is pushed there too);
# then the sealed seed boots in a second VM with the demo's site config.
# The seed is signed with a demo key made once in build/demo-keys; cosign and skopeo (built
# by deps) check the signature, and cosign the provenance attestation, while the registry is up.
DEMO_UNTIL ?= publish
DEMO_KEY := build/demo-keys/demo
COSIGN_FLAGS := --insecure-ignore-tlog=true --allow-http-registry --allow-insecure-registry --key $(DEMO_KEY).pub
demo: deps
	@$(MAKE) --no-print-directory build conformance-iso
	@test -f $(DEMO_KEY).key || { mkdir -p $(dir $(DEMO_KEY)) && (umask 077 && echo demo > $(DEMO_KEY).passphrase) && \
	  ./$(BIN) keys generate --passphrase-file $(DEMO_KEY).passphrase $(DEMO_KEY); }
	$(GO) run ./test/cmd/demoenv --blueprint blueprints/demo.yaml -- sh -ec '\
	  ./$(BIN) build "$$1" --until $(DEMO_UNTIL) --output-dir build/demo --cache-dir build/cache \
	    --sign-by $(DEMO_KEY).key --passphrase-file $(DEMO_KEY).passphrase; \
	  if [ $(DEMO_UNTIL) = publish ]; then seed="$$DEMO_REGISTRY/demo/seed:1.0"; \
	    ./$(BIN) seed inspect --key $(DEMO_KEY).pub "$$seed"; \
	    build/cosign/cosign verify $(COSIGN_FLAGS) "$$seed" >/dev/null; \
	    build/cosign/cosign verify-attestation --type slsaprovenance1 $(COSIGN_FLAGS) "$$seed" >/dev/null; \
	    echo "cosign verified the signature and the provenance of $$seed"; \
	    test/skopeo/verify-seed.sh $(DEMO_KEY).pub "$$seed"; fi' sh blueprints/demo.yaml
	./$(BIN) site-config create blueprints/demo/site.yaml -o build/demo/site.iso
	./$(BIN) seed boot build/demo/seal/seed --site-config build/demo/site.iso

# The snofactory image (Containerfile), built by buildah: no daemon, no registry. Its base is a
# local Debian bookworm image that test/image/build-base.sh makes with mmdebstrap when it is
# missing; a depot passes BASE_IMAGE=its-own-base instead (used as it is). The package layers
# are cached (--layers), so a rebuild after a code change reuses them and takes seconds. buildah uses
# overlay storage as root; set STORAGE_DRIVER=vfs where overlay cannot mount (e.g. inside a container).
IMAGE ?= localhost/snofactory:dev
LOCAL_BASE_IMAGE := localhost/snofactory-base:bookworm
BASE_IMAGE ?= $(LOCAL_BASE_IMAGE)
IMAGE_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE_REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
image: build
	@if [ "$(BASE_IMAGE)" = "$(LOCAL_BASE_IMAGE)" ]; then ./test/image/build-base.sh "$(BASE_IMAGE)"; fi
	buildah bud --isolation chroot --layers --force-rm --pull=missing \
	  --build-arg BASE_IMAGE=$(BASE_IMAGE) \
	  --build-arg VERSION=$(IMAGE_VERSION) --build-arg REVISION=$(IMAGE_REVISION) \
	  -f Containerfile -t $(IMAGE) .

clean:
	rm -rf build
