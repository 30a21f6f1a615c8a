// Module pause is the pod sandbox's pause process, built here because no
// image registry is reachable to pull registry.k8s.io/pause.
module github.com/kproxy/kproxy/examples/k8s/tools/pause

go 1.26.8
