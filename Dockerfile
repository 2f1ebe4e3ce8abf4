# toolgate container image, built where registries are reachable (the base
# images are named in full, so no short-name alias decides where they come
# from). Without a registry, `make image` builds an equivalent image from the
# local binary (deploy/image/Containerfile).
#
#   docker build --build-arg VERSION=$(git describe --tags --always) -t toolgate .
#   docker run --rm toolgate version
#   docker run --rm --read-only -p 8080:8080 -p 9091:9091 \
#       -v "$PWD/config.yaml:/etc/toolgate/config.yaml:ro" toolgate
#
# Published ports only reach listeners bound to 0.0.0.0 inside the container,
# so a config used with -p needs listen/admin_listen on 0.0.0.0 (and then
# inbound_auth if it holds an upstream key: toolgate refuses to start
# otherwise). As a Kubernetes sidecar the proxy stays on 127.0.0.1: see
# deploy/kubernetes.
#
# The go build line below must keep the same flags as `make build`:
# deploy/deploy_test.go compares the two and fails when they drift.

# ---- build stage -----------------------------------------------------------
# The build runs on the builder's own platform and cross-compiles (pure Go, no
# cgo), so a multi-arch build with buildx needs no emulation.
FROM --platform=$BUILDPLATFORM docker.io/library/golang:1.26-bookworm AS build
WORKDIR /src

# Modules first: this layer is reused as long as go.mod and go.sum stay the
# same, so a source change does not download every dependency again.
COPY go.mod go.sum ./
RUN go mod download && go mod verify

COPY . .

ARG VERSION=dev
ARG TARGETOS
ARG TARGETARCH
# The cache mount (BuildKit, Docker's default builder since 23.0) keeps Go's
# build cache between builds without putting it in a layer.
# CGO_ENABLED=0 gives a static binary that needs no libc in the final image;
# -trimpath keeps the builder's paths out of it; -s -w drop symbol tables.
RUN --mount=type=cache,target=/root/.cache/go-build \
    GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/toolgate ./cmd/toolgate

# The one place toolgate may write (the escalation file sink), created here
# because the final image has no shell to make it with.
RUN mkdir -p /out/state

# ---- final stage -----------------------------------------------------------
# distroless/static: CA certificates, tzdata and /etc/passwd with a nonroot
# user, and nothing else (no shell, no package manager).
FROM gcr.io/distroless/static-debian12:nonroot

COPY --from=build /out/toolgate /toolgate
COPY --from=build --chown=65532:65532 /out/state /var/lib/toolgate

# Numeric, so Kubernetes' runAsNonRoot can verify it without reading
# /etc/passwd; 65532 is distroless' "nonroot".
USER 65532:65532

# The image writes nowhere else, so it runs with a read-only root filesystem.
# Point escalation.sinks.file below this folder if you use the file sink.
VOLUME ["/var/lib/toolgate"]

# 8080: the proxy; 9091: the admin listener (/metrics, /healthz, /readyz).
EXPOSE 8080 9091

# The binary is the entrypoint and the subcommand is the default argument, so
# `docker run IMAGE` serves with the mounted config while
# `docker run IMAGE version` or `docker run IMAGE check --config …` run the
# other subcommands without overriding the entrypoint.
ENTRYPOINT ["/toolgate"]
CMD ["serve", "--config", "/etc/toolgate/config.yaml"]
