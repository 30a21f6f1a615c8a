package main

import (
	"strings"
	"testing"
	"time"
)

// TestUsage checks a missing or mistyped command exits 2 with the usage on
// stderr, and that help goes to stdout with exit 0.
func TestUsage(t *testing.T) {
	r := kproxy(t, 10*time.Second, "frobnicate")
	if r.code != 2 || !strings.Contains(r.stderr, `unknown command "frobnicate"`) || !strings.Contains(r.stderr, "Usage:") {
		t.Errorf("unknown command: exit %d, stderr %q", r.code, r.stderr)
	}
	r = kproxy(t, 10*time.Second)
	if r.code != 2 || !strings.Contains(r.stderr, "Usage:") {
		t.Errorf("no command: exit %d, stderr %q", r.code, r.stderr)
	}
	r = kproxy(t, 10*time.Second, "help")
	if r.code != 0 || !strings.Contains(r.stdout, "kproxy run") {
		t.Errorf("help: exit %d, stdout %q", r.code, r.stdout)
	}
}
