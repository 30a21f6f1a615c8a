//go:build !unix

package audit

import "os"

// openStdout returns os.Stdout: there is no SIGPIPE to guard against.
func openStdout() (*os.File, bool) { return os.Stdout, false }
