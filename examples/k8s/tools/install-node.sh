#!/usr/bin/env bash
# Builds what the one-node cluster of the sidecar tests (examples/k8s/node)
# runs beside the kube-apiserver and etcd of install-apiserver.sh: the
# kubelet, kube-controller-manager, kube-scheduler and kube-proxy from the
# Go modules pinned in tools/node (the same Kubernetes version), containerd
# 2.x, its runc shim and ctr from tools/containerd, and the pause image's
# binary, into the cache shared with the e2e suite ($KPROXY_E2E_CACHE, by
# default ~/.cache/kproxy-e2e):
#
#   bash examples/k8s/tools/install-node.sh
#
# It prints the directory that holds the binaries; the tests look there (or
# in $KPROXY_NODE_DIR). runc, the CNI plugins, iptables and buildah come
# from Debian's packages (apt-get install runc containernetworking-plugins
# iptables buildah); the script checks for them and says what to install.
# Running it again is cheap: the binaries are rebuilt only when the
# toolchain, the pinned modules or this script change.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

command -v go >/dev/null || { echo "install-node: Go 1.26+ is required: install it from your package manager or go.dev" >&2; exit 1; }
for tool in runc iptables buildah; do
  command -v $tool >/dev/null || { echo "install-node: $tool is required: apt-get install runc containernetworking-plugins iptables buildah" >&2; exit 1; }
done
for plugin in bridge host-local loopback; do
  [ -x /usr/lib/cni/$plugin ] || { echo "install-node: the CNI plugin /usr/lib/cni/$plugin is missing: apt-get install containernetworking-plugins" >&2; exit 1; }
done

cache=${KPROXY_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kproxy-e2e}
dir=$cache/node
mkdir -p "$dir"
stamp=$dir/stamp
bins="kubelet kube-controller-manager kube-scheduler kube-proxy containerd containerd-shim-runc-v2 ctr pause"
# One build at a time per cache; the second waits and finds it done.
exec 9>"$dir/.lock"
flock 9
want=$({ go env GOVERSION GOOS GOARCH; cat "$here"/node/go.mod "$here"/node/go.sum "$here"/containerd/go.mod "$here"/containerd/go.sum "$here"/pause/main.go "$0"; } | sha256sum | cut -d' ' -f1)
ok=1
for b in $bins; do [ -x "$dir/$b" ] || ok=0; done
if [ $ok = 1 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "== install-node: the node's binaries are up to date in $dir" >&2
  echo "$dir"
  exit 0
fi

echo "== install-node: building the node's binaries into $dir (a cold build takes minutes)" >&2
start=$SECONDS
rm -f "$stamp"
# A failed or interrupted build leaves no half-written binary: each is
# written to .tmp and renamed, and the stamp is written last.
trap 'rm -f "$dir"/*.tmp' EXIT
build() { # build DIR OUTPUT PACKAGE [go build flags...]
  local mod=$1 out=$2 pkg=$3; shift 3
  (cd "$here/$mod" && CGO_ENABLED=0 go build -trimpath "$@" -o "$dir/$out.tmp" "$pkg")
}
kv=$(cd "$here/node" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
minor=$(echo "$kv" | cut -d. -f2)
vpkg=k8s.io/component-base/version
# A build from the module proxy has no git state: the version the kubelet
# reports to the API server (and is checked against it) is set by hand.
vflags="-X $vpkg.gitVersion=$kv -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor"
for c in kubelet kube-controller-manager kube-scheduler kube-proxy; do
  build node $c k8s.io/kubernetes/cmd/$c -ldflags "$vflags"
done
# containerd without the snapshotters this node does not use (btrfs and
# devmapper need C headers); overlayfs and native stay.
ctags="no_btrfs no_devmapper no_zfs"
build containerd containerd github.com/containerd/containerd/v2/cmd/containerd -tags "$ctags"
build containerd containerd-shim-runc-v2 github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 -tags "$ctags"
build containerd ctr github.com/containerd/containerd/v2/cmd/ctr -tags "$ctags"
build pause pause .
for b in $bins; do mv -f "$dir/$b.tmp" "$dir/$b"; done
echo "$want" >"$stamp"
echo "== install-node: built in $((SECONDS - start))s" >&2
echo "$dir"
