package k8s_test

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// childAttr has the kernel kill a server process the tests start when the
// test binary dies without running its cleanups (go test's -timeout, a
// SIGKILL from CI), so no etcd, kube-apiserver or kproxy outlives it
// holding the fixed ports.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// lockPorts takes an exclusive flock on a file in the temp directory,
// waiting for any other run of this package to finish.
func lockPorts() (unlock func()) {
	name := filepath.Join(os.TempDir(), "kproxy-examples-k8s-ports.lock")
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lock %s: %v\n", name, err)
		os.Exit(1)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		fmt.Fprintf(os.Stderr, "another run of these tests holds %s; waiting for it\n", name)
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			fmt.Fprintf(os.Stderr, "lock %s: %v\n", name, err)
			os.Exit(1)
		}
	}
	return func() { f.Close() }
}
