package proxy

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/cloudwego/netpoll"

	"github.com/kproxy/kproxy/framing"
)

// Sides whose input kproxy holds: indexes of pair.held.
const (
	fromClient, fromUpstream = 0, 1
)

// budgetFloor is the input per side below which nothing is charged to
// max_buffered_bytes, so relaying small frames never touches the shared
// counter. What goes uncounted is at most 2 x budgetFloor per connection.
const budgetFloor = 16 << 10

var errOverBudget = errors.New("buffered bytes over max_buffered_bytes")

// budget is the process-wide count of the bytes kproxy holds in partial
// frames and unread input, against max_buffered_bytes. netpoll reads
// without backpressure, so each connection's own bound (max_unread_bytes)
// still lets many connections together hold far more than the machine
// has; this bounds their sum.
type budget struct {
	max  int64
	used atomic.Int64
}

// holding is what one pair has charged to the budget, per side.
type holding struct {
	mu       sync.Mutex // serializes the relays' and the sweep's charges
	held     [2]atomic.Int64
	released bool // the pair closed: nothing is charged any more
}

// hold sets what side from of p holds to n bytes, charging the change to
// the budget. It reports false, charging nothing, if that would take the
// budget past max_buffered_bytes: the caller closes the pair, the one
// growing, and other pairs keep what they hold.
func (p *pair) hold(from, n int) bool {
	h := &p.holding
	if n < budgetFloor {
		if h.held[from].Load() == 0 {
			return true // the common case: nothing held, nothing to charge
		}
		n = 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return true
	}
	delta := int64(n) - h.held[from].Load()
	if delta == 0 {
		return true
	}
	b := &p.s.budget
	if used := b.used.Add(delta); delta > 0 && used > b.max {
		b.used.Add(-delta)
		return false
	}
	h.held[from].Store(int64(n))
	p.s.m.buffered.Add(float64(delta))
	return true
}

// holdLeft charges what a relay leaves in r as it returns, so what it
// charged before it relayed does not stay counted.
func (p *pair) holdLeft(from int, side string, r netpoll.Reader) {
	if !p.hold(from, r.Len()) {
		p.closeOnError(side, errOverBudget)
	}
}

// nextFrame waits for the next whole frame. While a partial one waits for
// the rest, which netpoll keeps reading (and anything behind it), the pair
// is on the sweep's list, which charges what it holds to the budget.
func (p *pair) nextFrame(r netpoll.Reader, max int) ([]byte, error) {
	if _, whole, err := framing.Buffered(r, max); whole || err != nil {
		return framing.Next(r, max)
	}
	p.waitStart()
	defer p.waitEnd()
	return framing.Next(r, max)
}

// holdInput charges what both sides' readers hold now; it returns the side
// that would take the budget past its bound, or "".
func (p *pair) holdInput() string {
	switch {
	case !p.hold(fromClient, p.client.Reader().Len()):
		return "client"
	case !p.hold(fromUpstream, p.upstream.Reader().Len()):
		return "upstream"
	}
	return ""
}

// releaseHeld gives back what a closed pair held.
func (p *pair) releaseHeld() {
	h := &p.holding
	h.mu.Lock()
	defer h.mu.Unlock()
	h.released = true
	n := h.held[fromClient].Swap(0) + h.held[fromUpstream].Swap(0)
	if n != 0 {
		p.s.budget.used.Add(-n)
		p.s.m.buffered.Sub(float64(n))
	}
}
