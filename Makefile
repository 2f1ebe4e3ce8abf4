# toolgate developer commands. `make test` is the one CI runs.
GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
FUZZTIME  ?= 2m

.PHONY: build test unit test-tools node-deps fuzz bench load load-profile rss rss10k soak demo lint jaeger jaeger-test

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/toolgate ./cmd/toolgate

demo:
	@echo "make: building toolgate (the first build downloads and compiles its modules: minutes on a cold cache)"
	$(GO) run ./cmd/toolgate demo

# test installs what the suite needs (each test/node*/ folder's packages), then
# runs the main module's tests with the race detector, the held-stream stack
# test without it (the detector's instrumentation changes the frames it
# measures), then deploy/'s.
test: node-deps test-tools
	$(GO) test -race -count=1 ./...
	$(GO) test -count=1 -run '^TestHeldStreamStackShrinks$$' ./proxy/
	cd deploy && $(GO) test -count=1 ./...

unit: test-tools
	$(GO) test -count=1 ./...

# test-tools names each tool whose tests will be skipped here (go test
# prints no skips without -v; under CI=true those tests fail instead), and
# warns that a first, cold run compiles for a long time.
TEST_TOOLS := promtool:prometheus chromium:chromium redis-server:redis-server nginx:nginx podman:podman runc:runc kubectl:kubectl node:nodejs
test-tools:
	@for tp in $(TEST_TOOLS); do \
		t=$${tp%%:*}; p=$${tp#*:}; \
		command -v $$t >/dev/null 2>&1 || echo "make: $$t not found: its tests are skipped (apt-get install $$p; they fail under CI=true)"; \
	done
	@[ -d "$$($(GO) env GOCACHE)" ] && [ -n "$$(ls -A "$$($(GO) env GOCACHE)" 2>/dev/null)" ] || \
		echo "make: Go's build cache is empty: the first run compiles everything and takes 20 minutes or more on 2 cores"

node-deps:
	@if command -v npm >/dev/null 2>&1; then \
		for d in test/node*/; do \
			[ -f "$$d/package-lock.json" ] || continue; \
			(cd "$$d" && npm ci --no-audit --no-fund --loglevel=error) || exit 1; \
		done; \
	else echo "npm not found: the Node SDK tests will be skipped (they fail under CI=true)"; fi

# Jaeger v1.76.0 for traces (docs/tracing.md), built from test/jaeger, a
# module of its own so that its dependencies stay out of toolgate's go.mod.
# The first build takes several minutes (docs/tracing.md); .ci/run builds it
# and runs jaeger-test after make test. jaeger runs it with its all-in-one
# defaults: OTLP on localhost:4318 and :4317, the UI and query API on
# http://localhost:16686.
JAEGER ?= $(CURDIR)/bin/jaeger

$(JAEGER):
	cd test/jaeger && $(GO) build -o $(JAEGER) github.com/jaegertracing/jaeger/cmd/jaeger

jaeger: $(JAEGER)
	$(JAEGER)

# jaeger-test starts Jaeger on loopback ports, sends it a recovered
# request's trace through toolgate and reads it back from the query API.
jaeger-test: $(JAEGER)
	TOOLGATE_JAEGER_BIN=$(JAEGER) $(GO) test -tags jaeger -count=1 -run TestJaeger -v ./test/

# fuzz runs every fuzz target for FUZZTIME each (default 2m); opt-in, not in CI.
fuzz:
	@scripts/fuzz.sh $(FUZZTIME)

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

lint:
	gofmt -l . | (! grep .)
	$(GO) vet ./...

# load compares toolgate with a bare reverse proxy, nginx (when installed) and
# the mock upstream alone, on the small and the fixture workload, interleaved
# in one run on loopback (about 12.5 minutes of load, 9.5 without nginx).
# Pass flags in LOADFLAGS, e.g. make load LOADFLAGS='-json load.json'.
load:
	$(GO) run ./test/load $(LOADFLAGS)

# load-profile is the fixture scenarios once each with toolgate profiled:
# PROFILEDIR/cpu.prof and allocs.prof (go tool pprof -top PROFILEDIR/cpu.prof).
PROFILEDIR ?= /tmp/toolgate-load-profile
load-profile:
	$(GO) run ./test/load -scenarios fixture-plain-c32,fixture-stream-c32 -reps 1 -nginx off -profile $(PROFILEDIR) $(LOADFLAGS)

# rss holds 1,000 streamed calls open in toolgate over a TLS/HTTP/2 upstream
# and reports its peak RSS; rss10k is the 10,000-stream check against the
# 400 MiB target (opt-in; it needs a hard RLIMIT_NOFILE of 10,512).
rss:
	$(GO) run ./test/rss $(RSSFLAGS)

rss10k:
	$(GO) run ./test/rss -streams 10000 -max-rss-mib 400 $(RSSFLAGS)

# ---- container image and deploy/ -------------------------------------------
# deploy/ is a Go module of its own (kustomize, Kubernetes API types and
# BuildKit's Dockerfile parser stay out of toolgate's go.mod); `make test`
# runs its tests too.
.PHONY: deploy-test deploy-tidy prometheusrule image image-dockerfile

deploy-test:
	cd deploy && $(GO) test -count=1 ./...

# deploy/ builds toolgate's own packages through a replace directive, so a
# dependency added to the main module must be added there too.
deploy-tidy:
	cd deploy && $(GO) mod tidy

# The PrometheusRule in the base kustomization carries deploy/prometheus/
# rules.yaml; regenerate it after editing the rules (deploy-test checks).
prometheusrule:
	@{ printf '%s\n' \
		'# Generated from deploy/prometheus/rules.yaml by `make prometheusrule`: edit' \
		'# that file, then regenerate. deploy_test.go checks that the two agree.' \
		'apiVersion: monitoring.coreos.com/v1' \
		'kind: PrometheusRule' \
		'metadata:' \
		'  name: toolgate' \
		'  labels:' \
		'    app.kubernetes.io/name: toolgate' \
		'spec:'; \
	  sed -n '/^groups:/,$$p' deploy/prometheus/rules.yaml | sed 's/^/  /'; \
	} > deploy/kubernetes/base/prometheusrule.yaml

# image assembles IMAGE from bin/toolgate with no registry: scratch, CA
# certificates and tzdata from this machine's Debian packages, user 65532
# (deploy/image/Containerfile, scripts/image.sh), built by podman, or docker
# when podman is missing. Run it with the flags deploy/README.md gives.
IMAGE ?= localhost/toolgate:dev
image: build
	scripts/image.sh bin/toolgate $(IMAGE)

# image-dockerfile builds the Dockerfile, which pulls its base images from
# docker.io and gcr.io: it needs a registry and Docker with BuildKit. Its go
# build line mirrors the build target above (deploy-test compares them).
image-dockerfile:
	docker build --build-arg VERSION=$(VERSION) -t toolgate:$(VERSION) .

# soak runs mixed traffic against toolgate for SOAKTIME (default 10m) on
# loopback and reports RSS and goroutines over time. Off by default in CI.
SOAKTIME ?= 10m
soak:
	$(GO) run ./test/soak -duration $(SOAKTIME)
