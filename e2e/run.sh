#!/usr/bin/env bash
# End-to-end tests: the kproxy binary against real peers run as processes
# (a Jaeger v2 receiving kproxy's spans; later real Kafka brokers).
#
#   bash e2e/run.sh                        # everything
#   bash e2e/run.sh -run TestSpansReachJaeger/http
#
# 1. Builds e2e/bin/jaeger from the Jaeger Go module (a tool of this module,
#    pinned in e2e/go.mod) when it is missing or stale. The first build takes
#    several minutes; later runs reuse it. e2e/bin/ is not in git.
# 2. Runs `go test` in this module (extra arguments go to go test).
# Every process the tests start listens on 127.0.0.1 and is killed when its
# test ends.
set -euo pipefail
cd "$(dirname "$0")"

command -v go >/dev/null || { echo "Go 1.26+ is required: install it from your package manager or go.dev" >&2; exit 1; }

# The binary is stale when the toolchain or this module's requirements
# changed since it was built.
jaeger=bin/jaeger
stamp=bin/jaeger.stamp
want=$({ go env GOVERSION GOOS GOARCH; cat go.mod go.sum; } | sha256sum | cut -d' ' -f1)
if [ -x "$jaeger" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "== e2e: $jaeger is up to date"
else
  echo "== e2e: building $jaeger (Jaeger v2, github.com/jaegertracing/jaeger/cmd/jaeger; a cold build takes minutes)"
  mkdir -p bin
  start=$SECONDS
  rm -f "$stamp"
  go build -o "$jaeger.tmp" github.com/jaegertracing/jaeger/cmd/jaeger
  mv -f "$jaeger.tmp" "$jaeger"
  echo "$want" >"$stamp"
  echo "== e2e: built $jaeger in $((SECONDS - start))s"
fi

echo "== e2e: go vet"
go vet ./...

echo "== e2e: go test"
go test -count=1 -v -timeout 5m "$@" ./...
