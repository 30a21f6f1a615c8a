package loop

import (
	"github.com/cloudwego/netpoll"

	"github.com/kproxy/kproxy/proxy/core"
)

// Pair is a netpoll connection pair as code outside the driver may look
// at it: the core's registry holds core.Conns, and this is the transport
// state under one that the core does not see (its sockets' buffers, a
// flush under way, what a batch pins). It is for tests and diagnostics;
// nothing in kproxy's relay reads it.
type Pair struct{ p *pair }

// Sides a flush writes to, as Pair.Flushing takes them.
const (
	ToClient, ToUpstream = toClient, toUpstream
)

// PairOf returns the pair under c, false when c is not this driver's.
func PairOf(c *core.Conn) (Pair, bool) {
	p, ok := c.Transport().(*pair)
	return Pair{p}, ok
}

// Client and Upstream are the pair's two netpoll connections.
func (x Pair) Client() netpoll.Connection   { return x.p.client }
func (x Pair) Upstream() netpoll.Connection { return x.p.upstream }

// Flushing reports whether a flush to side to is under way.
func (x Pair) Flushing(to int) bool { return x.p.flushes[to].Load()&1 == 1 }

// Pinned is what the batch being flushed holds of side from's input.
func (x Pair) Pinned(from int) int64 { return x.p.holding.pinned[from].Load() }

// LargeSendBuffer reports whether the upstream socket got the large-frame
// send buffer.
func (x Pair) LargeSendBuffer() bool { return x.p.upLarge.Load() }

// HoldUpstreamWriter keeps the client's relay from writing upstream (it
// waits for the writer) until the returned func is called: a test uses
// it to have input buffered as one batch.
func (x Pair) HoldUpstreamWriter() (release func()) {
	x.p.upMu.Lock()
	return x.p.upMu.Unlock
}

// Waiting reports whether one of the pair's relays waits (a flush, a
// full table, a throttle, a SASL answer).
func (x Pair) Waiting() bool { return x.p.blocked.Load() > 0 }

// Conn is the core's connection the pair carries.
func (x Pair) Conn() *core.Conn { return x.p.c }

// OverflowSweep is how often the driver checks its waiting pairs against
// their bounds.
const OverflowSweep = overflowSweep
