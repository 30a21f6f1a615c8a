#!/usr/bin/env bash
# End-to-end suite: the kproxy binary against real peers run as processes:
# Apache Kafka brokers fetched from Maven Central, seven Kafka client
# libraries, and a Jaeger v2 receiving kproxy's spans.
#
#   bash e2e/run.sh                        # everything
#   bash e2e/run.sh -run TestCompat        # extra arguments go to go test
#
# It installs what it needs into a cache outside the clone, so later runs
# and fresh clones reuse it ($KPROXY_E2E_CACHE, by default
# ~/.cache/kproxy-e2e):
#   1. Apache Kafka $KAFKA_VERSIONS (broker, tools and Java client jars),
#      with Maven, from e2e/kafka/pom.xml;
#   2. each client driver, by clients/*/install.sh;
#   3. a Jaeger v2 binary, built from the Jaeger module pinned in
#      tools/jaeger (a cold build takes minutes);
#   4. an Ory Hydra binary (the oauth column's authorization server),
#      built from the module pinned in tools/hydra.
# Then it runs go vet and go test in this module. Every process the tests
# start listens on 127.0.0.1 and is killed when its test ends. A full run
# writes COMPAT.md and copies it into docs/compatibility.md.
set -euo pipefail
cd "$(dirname "$0")"

need() { command -v "$1" >/dev/null || { echo "e2e: $1 is required: $2" >&2; exit 1; }; }
need go "install Go 1.26+ from your package manager or go.dev"
need java "install a JDK 17+ (Debian: apt-get install openjdk-17-jdk-headless)"
need mvn "install Maven (Debian: apt-get install maven)"
need gcc "install a C compiler for cgo (confluent-kafka-go links librdkafka; Debian: apt-get install build-essential)"
need python3 "install Python 3.9+ with venv (Debian: apt-get install python3-venv)"
need node "install Node.js 20+ with npm (Debian: apt-get install nodejs npm)"

# Newest first: the first runs every scenario, the others the core ones.
KAFKA_VERSIONS="4.4.0 3.9.2"
cache=${KPROXY_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kproxy-e2e}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
export KPROXY_E2E_CACHE=$cache KPROXY_E2E_KAFKA_VERSIONS=$KAFKA_VERSIONS

for v in $KAFKA_VERSIONS; do
  dir=$cache/kafka-$v
  stamp=$(sha256sum kafka/pom.xml | cut -d' ' -f1)
  if [ -f "$dir/stamp" ] && [ "$(cat "$dir/stamp")" = "$stamp" ]; then
    echo "== e2e: Apache Kafka $v is cached in $dir"
    continue
  fi
  echo "== e2e: fetching Apache Kafka $v with Maven into $dir"
  rm -rf "$dir"
  mvn -q -B -Dstyle.color=never -f kafka/pom.xml -Dkafka.version="$v" dependency:copy-dependencies -DoutputDirectory="$dir/libs"
  echo "$stamp" >"$dir/stamp"
done

shopt -s nullglob
for install in clients/*/install.sh; do
  echo "== e2e: $install"
  bash "$install" "$cache"
done

# build_tool NAME DIR PACKAGE WHAT [go build flags...] builds PACKAGE from
# the module pinned in tools/DIR into $cache/NAME/NAME, unless the binary
# there was built from the same toolchain, pinned module and flags, and
# prints its path.
build_tool() {
  local name=$1 dir=$2 pkg=$3 what=$4
  shift 4
  local bin=$cache/$name/$name stamp=$cache/$name/stamp want start
  want=$({ go env GOVERSION GOOS GOARCH; cat "tools/$dir/go.mod" "tools/$dir/go.sum"; if [ $# -gt 0 ]; then echo "$@"; fi; } | sha256sum | cut -d' ' -f1)
  if [ -x "$bin" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "== e2e: $bin is up to date" >&2
  else
    echo "== e2e: building $bin ($what, $pkg; a cold build takes minutes)" >&2
    mkdir -p "$(dirname "$bin")"
    start=$SECONDS
    rm -f "$stamp"
    (cd "tools/$dir" && go build "$@" -o "$bin.tmp" "$pkg") >&2
    mv -f "$bin.tmp" "$bin"
    echo "$want" >"$stamp"
    echo "== e2e: built $bin in $((SECONDS - start))s" >&2
  fi
  echo "$bin"
}

KPROXY_E2E_JAEGER=$(build_tool jaeger jaeger github.com/jaegertracing/jaeger/cmd/jaeger "Jaeger v2")
# Ory Hydra, the oauth column's authorization server, with SQLite (cgo)
# for its in-memory store.
KPROXY_E2E_HYDRA=$(CGO_ENABLED=1 build_tool hydra hydra github.com/ory/hydra/v2 "Ory Hydra with SQLite" -tags sqlite,sqlite_omit_load_extension)
export KPROXY_E2E_JAEGER KPROXY_E2E_HYDRA

echo "== e2e: go vet"
go vet ./...

echo "== e2e: go test"
# -json through summary.py: the same output as -v, then each failed test
# named again with its last lines.
go test -count=1 -json -timeout 45m "$@" ./... | python3 summary.py

# A full run (no go test arguments) rewrote COMPAT.md; copy it into
# docs/compatibility.md.
if [ $# -eq 0 ] && [ -f COMPAT.md ]; then
  python3 - ../docs/compatibility.md COMPAT.md <<'PY'
import sys
readme, compat = sys.argv[1], open(sys.argv[2]).read()
text = open(readme).read()
begin, end = "<!-- compat:begin -->\n", "<!-- compat:end -->"
i, j = text.find(begin), text.find(end)
if i < 0 or j < i:
    sys.exit(readme + " has no compat:begin/compat:end markers")
open(readme, "w").write(text[: i + len(begin)] + compat + text[j:])
PY
  echo "== e2e: COMPAT.md copied into docs/compatibility.md"
fi
