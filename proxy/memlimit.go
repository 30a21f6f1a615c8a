package proxy

import (
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/kproxy/kproxy/proxy/loop"
)

// memoryHeadroom is what the soft memory limit allows above
// max_buffered_bytes for what the budget does not count and every kproxy
// has: the Go runtime, metrics, the tracer's export queue, rule and
// topic-id state. It is 48 MiB so that resident memory stays under the
// budget + 64 MiB: the limit does not count the binary's own code and data
// (about 12 MiB resident), nor inflation's at most 9 MiB per slot.
const memoryHeadroom = 48 << 20

// connMemory is what the limit adds per open connection: the input below
// loop.BudgetFloor each side may hold uncharged, which is more than an idle
// pair costs (12 KiB of RSS, docs/benchmarks/round-1.md, "Memory"), so 10,000 idle clients never
// push the collector into working hard.
const connMemory = 2 * loop.BudgetFloor

// memoryLimitPeriod is how often the limit follows the connections open.
const memoryLimitPeriod = time.Second

// memoryLimit is the soft memory limit for conns open connections.
func (s *Server) memoryLimit(conns int64) int64 {
	return int64(s.cfg.MaxBufferedBytes) + memoryHeadroom + max(conns, 0)*connMemory
}

// LimitMemory sets Go's soft memory limit (runtime/debug.SetMemoryLimit)
// to max_buffered_bytes plus headroom, and keeps it following the
// connections open until the server stops. Without it the collector lets
// the heap grow to twice what is live, so under attack, with the budget
// full, the process would use up to twice max_buffered_bytes. Near the
// limit the collector runs more often, at most about half the CPU (the
// runtime's cap), and only while what is live is close to the budget.
// If GOMEMLIMIT is set, it is left in force. Call once, before Serve.
func (s *Server) LimitMemory() {
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		s.log.Info().Str("GOMEMLIMIT", v).Msg("soft memory limit left to GOMEMLIMIT")
		return
	}
	limit := s.memoryLimit(s.core.Slots())
	debug.SetMemoryLimit(limit)
	s.log.Info().Int64("memory_limit", limit).Int("max_buffered_bytes", s.cfg.MaxBufferedBytes).
		Msg(fmt.Sprintf("soft memory limit: max_buffered_bytes + %d MiB + %d KiB per connection (GOMEMLIMIT overrides)",
			memoryHeadroom>>20, connMemory>>10))
	go s.followMemoryLimit(limit)
}

// followMemoryLimit moves the limit with the connections open, once a
// period, until the server stops.
func (s *Server) followMemoryLimit(limit int64) {
	t := time.NewTicker(memoryLimitPeriod)
	defer t.Stop()
	for {
		select {
		case <-s.core.Done():
			return
		case <-t.C:
		}
		if l := s.memoryLimit(s.core.Slots()); l != limit {
			limit = l
			debug.SetMemoryLimit(limit)
		}
	}
}
