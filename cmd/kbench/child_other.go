//go:build !linux

package main

import "os/exec"

// dieWithParent has no portable equivalent; kbench measures Linux.
func dieWithParent(*exec.Cmd) {}
