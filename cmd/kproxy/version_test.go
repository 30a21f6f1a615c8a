package main

import (
	"testing"
	"time"
)

// TestVersion checks the -X stamped version is what `kproxy version` and
// `kproxy --version` print, so release builds can be identified.
func TestVersion(t *testing.T) {
	for _, arg := range []string{"version", "--version"} {
		r := kproxy(t, 10*time.Second, arg)
		if r.code != 0 || r.stdout != "kproxy "+testVersion+"\n" {
			t.Errorf("kproxy %s: exit %d, stdout %q, want %q", arg, r.code, r.stdout, "kproxy "+testVersion+"\n")
		}
	}
}
