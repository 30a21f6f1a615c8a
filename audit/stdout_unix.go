//go:build unix

package audit

import (
	"os"

	"golang.org/x/sys/unix"
)

// openStdout returns a duplicate of standard output for the log to own.
// Go kills a process whose fd 1 meets a closed pipe (SIGPIPE); on a
// duplicate the write only fails with EPIPE, which the writer counts and
// drops, so a log collector going away cannot take kproxy down with it.
// Without a duplicate, it falls back to os.Stdout.
func openStdout() (*os.File, bool) {
	fd, err := unix.Dup(1)
	if err != nil {
		return os.Stdout, false
	}
	unix.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), "stdout"), true
}
