package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel stop a started kproxy if kbench itself is
// killed, so an interrupted compare leaves no proxy behind.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
