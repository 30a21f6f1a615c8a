package proxy

import (
	"fmt"
	"os"
	"testing"
)

// TestMain configures netpoll as cmd/kproxy does at start.
func TestMain(m *testing.M) {
	if spec := os.Getenv(stormEnv); spec != "" {
		stormChild(spec) // never returns
	}
	if err := ConfigureNetpoll(); err != nil {
		fmt.Fprintln(os.Stderr, "proxy tests: configuring netpoll:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
