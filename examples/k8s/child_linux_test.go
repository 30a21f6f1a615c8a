package k8s_test

import "syscall"

// childAttr has the kernel kill a server process the tests start when the
// test binary dies without running its cleanups (go test's -timeout, a
// SIGKILL from CI), so no etcd, kube-apiserver or kproxy outlives it
// holding the fixed ports.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
