//go:build linux && nodetest

package node_test

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
)

// TestMain holds a host-wide lock while the tests run (the node's names,
// addresses and ports are fixed), removes what an earlier run left, and
// starts the reaper that removes this run's node should the test binary
// die without its cleanups.
func TestMain(m *testing.M) {
	if v := os.Getenv(reapEnv); v != "" {
		pid, err := strconv.Atoi(v)
		if err != nil {
			os.Exit(2)
		}
		reap(pid)
		os.Exit(0)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "the node tests start a kubelet, containerd and runc and need root (run them as root, as CI does)")
		os.Exit(1)
	}
	unlock := lockNode()
	if left := teardown(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "an earlier run's node could not be removed: %v\n", left)
		os.Exit(1)
	}
	if err := startReaper(); err != nil {
		fmt.Fprintf(os.Stderr, "start the reaper: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	if left := teardown(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "the node outlived the run: %v\n", left)
		code = 1
	}
	unlock()
	os.Exit(code)
}

// lockNode takes the exclusive lock on the node's names, waiting for
// any other run of these tests to finish.
func lockNode() (unlock func()) {
	name := "/run/lock/kproxy-node.lock"
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lock %s: %v\n", name, err)
		os.Exit(1)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		fmt.Fprintf(os.Stderr, "another run of the node tests holds %s; waiting for it\n", name)
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			fmt.Fprintf(os.Stderr, "lock %s: %v\n", name, err)
			os.Exit(1)
		}
	}
	return func() { f.Close() }
}
