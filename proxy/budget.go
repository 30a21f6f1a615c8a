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

var (
	errOverBudget = errors.New("buffered bytes over max_buffered_bytes")
	// errSlowOverBudget closes the peer that does not take a batch kproxy
	// holds for it, when that batch is the largest charge.
	errSlowOverBudget = errors.New("batch waiting for a slow reader over max_buffered_bytes")
)

// budget is the process-wide count of the bytes kproxy holds in partial
// frames, unread input and batches being flushed, against
// max_buffered_bytes. netpoll reads without backpressure, so each
// connection's own bound (max_unread_bytes) still lets many connections
// together hold far more than the machine has; this bounds their sum.
type budget struct {
	max  int64
	used atomic.Int64
}

// holding is what one pair has charged to the budget, per side.
type holding struct {
	mu   sync.Mutex // serializes the relays' and the sweep's charges
	held [2]atomic.Int64
	// pinned is what a side's relay has taken from its reader (Next) and
	// not yet released: the batch it is flushing, which stays in netpoll's
	// input buffers until the peer has taken all of it. Set by the relay,
	// charged with the reader's Len.
	pinned   [2]atomic.Int64
	released bool // the pair closed: nothing is charged any more
}

// hold charges what side from of p holds now: what its reader r has
// buffered plus the batch pinned for a flush. When that would take the
// budget past max_buffered_bytes, the largest holder is closed: another
// pair, after which the charge is tried again, or p itself, when hold
// reports false and the caller closes p. So a hog that stopped growing is
// closed, not the next honest client to buffer a frame. The caller must
// not be on a poller (closing waits for the victim's poller task).
func (p *pair) hold(from int, r netpoll.Reader) bool {
	for {
		over, mine := p.charge(from, r)
		if !over {
			return true
		}
		v := p.s.largest(p, mine)
		if v == nil {
			return false
		}
		o := v.overBudget()
		v.closeOnError(o.side, o.err)
		v.releaseHeld() // if another goroutine closes it, its charge is freed now
	}
}

// charge sets what side from of p holds to its reader's length plus what
// is pinned, read under the pair's lock so a charge never goes back to a
// stale value. If that would take the budget past its bound it charges
// nothing and reports over, with what p would then hold in all.
func (p *pair) charge(from int, r netpoll.Reader) (over bool, mine int64) {
	h := &p.holding
	if r.Len()+int(h.pinned[from].Load()) < budgetFloor && h.held[from].Load() == 0 {
		return false, 0 // the common case: nothing held, nothing to charge
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return false, 0
	}
	n := int64(r.Len()) + h.pinned[from].Load()
	if n < budgetFloor {
		n = 0
	}
	delta := n - h.held[from].Load()
	if delta == 0 {
		return false, 0
	}
	b := &p.s.budget
	if used := b.used.Add(delta); delta > 0 && used > b.max {
		b.used.Add(-delta)
		return true, n + h.held[1-from].Load()
	}
	h.held[from].Store(n)
	p.s.m.buffered.Add(float64(delta))
	return false, 0
}

// largest returns the open pair other than p that holds the most, if it
// holds more than mine. It walks every pair, but only when the budget is
// full.
func (s *Server) largest(p *pair, mine int64) *pair {
	s.mu.Lock()
	defer s.mu.Unlock()
	var big *pair
	most := mine
	for q := range s.pairs {
		if q == p || q.closed.Load() {
			continue
		}
		if n := q.holding.held[fromClient].Load() + q.holding.held[fromUpstream].Load(); n > most {
			big, most = q, n
		}
	}
	return big
}

// overBudget says which side of p to blame for its charge, and why: the
// side whose input it mostly holds, or, when that input is a batch waiting
// to be flushed, the peer that does not take it.
func (p *pair) overBudget() overflowing {
	h := &p.holding
	from := fromClient
	if h.held[fromUpstream].Load() > h.held[fromClient].Load() {
		from = fromUpstream
	}
	return p.overBudgetFrom(from)
}

// overBudgetFrom is overBudget for a charge of side from.
func (p *pair) overBudgetFrom(from int) overflowing {
	if p.holding.pinned[from].Load() > 0 {
		return overflowing{p, sideName[1-from], errSlowOverBudget}
	}
	return overflowing{p, sideName[from], errOverBudget}
}

// sideName is each side as logged and counted.
var sideName = [2]string{fromClient: "client", fromUpstream: "upstream"}

// holdLeft charges what a relay leaves in r as it returns, so what it
// charged before it relayed does not stay counted.
func (p *pair) holdLeft(from int, r netpoll.Reader) {
	if !p.hold(from, r) {
		p.closeOnError(sideName[from], errOverBudget)
	}
}

// pin records n bytes taken from side from's reader and not yet released;
// unpin, once they are, clears it.
func (p *pair) pin(from, n int) { p.holding.pinned[from].Store(int64(n)) }
func (p *pair) unpin(from int) {
	if p.holding.pinned[from].Load() != 0 {
		p.holding.pinned[from].Store(0)
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

// holdInput charges what both sides hold now, for the sweep, and adds to
// over the pair to close if that takes the budget past its bound: the
// largest holder, p or another. A charge refused for another pair's sake
// is tried again on the next sweep, once that pair is closed.
func (p *pair) holdInput(over []overflowing) []overflowing {
	for from, c := range [2]netpoll.Connection{p.client, p.upstream} {
		o, mine := p.charge(from, c.Reader())
		if !o {
			continue
		}
		if v := p.s.largest(p, mine); v != nil {
			return append(over, v.overBudget())
		}
		return append(over, p.overBudgetFrom(from))
	}
	return over
}

// holds reports whether p has a charge on the budget.
func (p *pair) holds() bool {
	return p.holding.held[fromClient].Load()+p.holding.held[fromUpstream].Load() != 0
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
