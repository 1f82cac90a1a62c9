# syntax=docker/dockerfile:1
# Multi-stage build of the worker and starter: static binaries on a distroless, non-root base.
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
# The whole module (.dockerignore leaves out .git, build outputs and test reports): a list of
# folders here would miss the next package added.
COPY . .
# docker build --build-arg VERSION=0.1.0 .; without it the binaries report 0.1.0-dev.
ARG VERSION
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X github.com/temporal-rollout/rollout/internal/version.Version=${VERSION}" -o /out/worker ./worker \
 && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X github.com/temporal-rollout/rollout/internal/version.Version=${VERSION}" -o /out/starter ./starter

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/worker /out/starter /usr/local/bin/
# 65532 is distroless' nonroot user. Run with a read-only root filesystem: nothing is written.
USER 65532:65532
EXPOSE 9090
ENTRYPOINT ["/usr/local/bin/worker"]
