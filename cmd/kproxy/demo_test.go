package main

import (
	"strings"
	"testing"
	"time"
)

// TestDemoCheck runs the one-command proof that kproxy relays real Kafka
// traffic: produce and consume through it against the embedded broker.
func TestDemoCheck(t *testing.T) {
	r := kproxy(t, 60*time.Second, "demo", "--check", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0")
	if r.code != 0 || !strings.Contains(r.stdout, "demo check passed") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}
