#!/usr/bin/env bash
# Builds the kube-apiserver and etcd that the examples' API-server tests
# start on 127.0.0.1, from the Go modules pinned in tools/apiserver, into a
# cache outside the clone shared with the e2e suite ($KPROXY_E2E_CACHE, by
# default ~/.cache/kproxy-e2e):
#
#   bash examples/k8s/tools/install-apiserver.sh
#
# It prints the directory that holds both binaries; the tests look there
# (or in $KPROXY_APISERVER_DIR). Running it again is cheap: the binaries
# are rebuilt only when the toolchain or the pinned modules change. A cold
# build compiles all of kube-apiserver and takes several minutes.
set -euo pipefail
cd "$(dirname "$0")/apiserver"

command -v go >/dev/null || { echo "install-apiserver: Go 1.26+ is required: install it from your package manager or go.dev" >&2; exit 1; }

cache=${KPROXY_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kproxy-e2e}
dir=$cache/apiserver
mkdir -p "$dir"
stamp=$dir/stamp
# One build at a time per cache (two clones, two CI runs): the second waits
# and then finds the binaries up to date.
exec 9>"$dir/.lock"
flock 9
want=$({ go env GOVERSION GOOS GOARCH; cat go.mod go.sum ../install-apiserver.sh; } | sha256sum | cut -d' ' -f1)
if [ -x "$dir/kube-apiserver" ] && [ -x "$dir/etcd" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "== install-apiserver: kube-apiserver and etcd are up to date in $dir" >&2
  echo "$dir"
  exit 0
fi

echo "== install-apiserver: building kube-apiserver and etcd into $dir (a cold build takes minutes)" >&2
start=$SECONDS
rm -f "$stamp"
# A failed or interrupted build leaves no half-written binary behind; the
# stamp stays absent, so the tests refuse the old binaries until a build
# completes.
trap 'rm -f "$dir/kube-apiserver.tmp" "$dir/etcd.tmp"' EXIT
# A build from the module proxy has no git state: give kube-apiserver the
# version it reports on /version (and checks clients against) by hand.
kv=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
minor=$(echo "$kv" | cut -d. -f2)
vpkg=k8s.io/component-base/version
go build -ldflags "-X $vpkg.gitVersion=$kv -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor" \
  -o "$dir/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
go build -o "$dir/etcd.tmp" go.etcd.io/etcd/server/v3
mv -f "$dir/kube-apiserver.tmp" "$dir/kube-apiserver"
mv -f "$dir/etcd.tmp" "$dir/etcd"
echo "$want" >"$stamp"
echo "== install-apiserver: built in $((SECONDS - start))s" >&2
echo "$dir"
