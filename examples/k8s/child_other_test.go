//go:build !linux

package k8s_test

import "syscall"

// childAttr: only Linux can tie a child's life to its parent's.
func childAttr() *syscall.SysProcAttr { return nil }

// lockPorts: no host-wide lock off Linux; runs there must not overlap.
func lockPorts() (unlock func()) { return func() {} }
