package k8s_test

import (
	"os"
	"testing"
)

// TestMain holds a host-wide lock while the tests run: they start
// kproxy, etcd and kube-apiserver on fixed loopback ports, so a second
// run of this package (another clone, another CI job) waits for this one
// instead of failing on a port it took.
func TestMain(m *testing.M) {
	unlock := lockPorts()
	code := m.Run()
	unlock()
	os.Exit(code)
}
