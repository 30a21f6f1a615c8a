package proxy

import (
	"runtime/debug"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
)

// restoreMemoryLimit puts the process's soft memory limit back once the
// test, and the servers it started, are done.
func restoreMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
}

// The soft memory limit is max_buffered_bytes plus headroom, and follows
// the connections open (issue 14, item 5: memory stays near the budget).
func TestLimitMemoryFromTheBudget(t *testing.T) {
	restoreMemoryLimit(t) // before the server, so it is stopped first
	t.Setenv("GOMEMLIMIT", "")
	const budget = 256 << 20
	up := startFakeUpstream(t, nil)
	env := startProxy(t, up.addr(), func(cfg *Config, _ *framing.Config, _ *correlate.Config) {
		cfg.MaxBufferedBytes = budget
	})
	env.srv.LimitMemory()
	if got, want := debug.SetMemoryLimit(-1), int64(budget+memoryHeadroom); got != want {
		t.Fatalf("memory limit %d, want %d", got, want)
	}
	if !env.logs.contains(`"memory_limit":`) {
		t.Fatalf("limit not logged: %s", env.logs)
	}
	dialRaw(t, env.addr)
	waitFor(t, 10*time.Second, "the pair opened", func() bool { return testutil.ToFloat64(env.m.Open) == 1 })
	waitFor(t, 10*time.Second, "the limit to follow the connection", func() bool {
		return debug.SetMemoryLimit(-1) == budget+memoryHeadroom+32<<10
	})
}

// GOMEMLIMIT, when set, is the operator's choice and stays in force.
func TestLimitMemoryLeavesGOMEMLIMIT(t *testing.T) {
	restoreMemoryLimit(t)
	t.Setenv("GOMEMLIMIT", "3GiB")
	debug.SetMemoryLimit(3 << 30) // as the runtime read it at start
	up := startFakeUpstream(t, nil)
	env := startProxy(t, up.addr(), func(cfg *Config, _ *framing.Config, _ *correlate.Config) {
		cfg.MaxBufferedBytes = 256 << 20
	})
	env.srv.LimitMemory()
	if got := debug.SetMemoryLimit(-1); got != 3<<30 {
		t.Fatalf("memory limit %d, want GOMEMLIMIT's %d", got, 3<<30)
	}
	if !env.logs.contains(`soft memory limit left to GOMEMLIMIT`) {
		t.Fatalf("not logged: %s", env.logs)
	}
}
