# kproxy container image: a static binary on distroless, run as a non-root
# numeric user with no shell.
#
#   docker build --build-arg VERSION=$(git describe --tags --always) -t kproxy .
#   docker run --rm kproxy version
#
# cmd/kproxy/dockerfile_test.go runs this file's build step and checks the
# result, since no Docker engine is at hand in CI. The real-node tests
# (examples/k8s/node) run the final stage as CI's image: the same binary
# build, path, config, user, entrypoint and command, on a base layer made
# from Debian's packages (ca-certificates, a passwd and group naming
# 65532) instead of distroless, whose registry CI cannot reach.

FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.buildVersion=${VERSION}" -o /out/kproxy ./cmd/kproxy

# distroless/static: CA certificates, /etc/passwd with the nonroot user, no
# shell or package manager.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/kproxy /usr/local/bin/kproxy
COPY examples/k8s/kproxy.yaml /etc/kproxy/kproxy.yaml
USER 65532:65532
# Kafka clients, then admin (/healthz, /readyz, /metrics).
EXPOSE 9092 9190
ENTRYPOINT ["/usr/local/bin/kproxy"]
CMD ["run", "--config", "/etc/kproxy/kproxy.yaml"]
