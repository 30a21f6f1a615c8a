package loop

import (
	"sync"
	"sync/atomic"

	"github.com/cloudwego/netpoll"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/proxy/core"
)

// Sides whose input kproxy holds: indexes of holding's arrays. Like
// toClient and toUpstream (stall.go) they number the two sockets, 0 the
// client and 1 the upstream, but say what is read from a socket, not
// what is written to it: input read from side i is written to side 1-i.
const (
	fromClient, fromUpstream = core.FromClient, core.FromUpstream
)

// budgetFloor is the input per side below which nothing is charged to
// max_buffered_bytes, so relaying small frames never touches the shared
// counter. A side's unread input, the batch pinned for its flush and what
// a poller's send handed to a goroutine are charged together, so what goes
// uncounted is at most 2 x budgetFloor per connection.
const budgetFloor = 16 << 10

// BudgetFloor is budgetFloor, for the memory limit's per-connection
// allowance.
const BudgetFloor = budgetFloor

// holding is what one pair has charged to the budget, per side.
type holding struct {
	mu   sync.Mutex // serializes the relays' and the sweep's charges
	held [2]atomic.Int64
	// pinned is what a side's relay has taken from its reader (Next) and
	// not yet released: the batch it is flushing, which stays in netpoll's
	// input buffers until the peer has taken all of it. Set by the relay,
	// charged with the reader's Len.
	pinned [2]atomic.Int64
	// handed is what of a side's input waits in the peer's netpoll writer
	// for a goroutine to flush it: the rest of a batch a send on the
	// poller left (finishSend), or kproxy's own answers (flushAnswers).
	// Set by whoever owns that writer (upMu for fromClient, WMu for
	// fromUpstream), charged with the reader's Len like pinned.
	handed [2]atomic.Int64
}

// hold charges what side from of p holds now: what its reader r has
// buffered plus the batch pinned or handed for a flush. When that would
// take the budget past max_buffered_bytes, the core closes the largest
// holder, of either driver (core.Conn.Hold); false means it was p. The
// caller must not be on a poller.
func (p *pair) hold(from int, r netpoll.Reader) bool {
	return p.c.Hold(from, func() (bool, int64) { return p.charge(from, r) })
}

// charge sets what side from of p holds to its reader's length plus what
// is pinned and handed, read under the pair's lock so a charge never goes
// back to a stale value. If that would take the budget past its bound it
// charges nothing and reports over, with the n bytes it would have
// charged.
func (p *pair) charge(from int, r netpoll.Reader) (over bool, n int64) {
	h := &p.holding
	if r.Len()+int(h.pinned[from].Load()+h.handed[from].Load()) < budgetFloor && h.held[from].Load() == 0 {
		return false, 0 // the common case: nothing held, nothing to charge
	}
	h.mu.Lock()
	over, n, listed := p.chargeLocked(from, r)
	h.mu.Unlock()
	if !listed {
		// A charge left on a pair that stops waiting is cleared only by
		// the sweep: with nothing more charged (what is left relayed on
		// the poller), it would stick to an idle pair.
		p.list()
	}
	return over, n
}

// chargeLocked is charge under the pair's lock; listed is false when it
// stored a charge on a pair not on the sweep's list.
func (p *pair) chargeLocked(from int, r netpoll.Reader) (over bool, n int64, listed bool) {
	h := &p.holding
	if p.c.Closed() { // Close moves to closed before it releases the charge
		return false, 0, true
	}
	n = int64(r.Len()) + h.pinned[from].Load() + h.handed[from].Load()
	if n < budgetFloor {
		n = 0
	}
	delta := n - h.held[from].Load()
	if delta == 0 {
		return false, 0, true
	}
	if !p.d.k.Budget.Take(delta) {
		return true, n, true
	}
	h.held[from].Store(n)
	return false, 0, n == 0 || p.swept.Load()
}

// Charged is what side from has charged (core.Transport).
func (p *pair) Charged(from int) int64 { return p.holding.held[from].Load() }

// Blame says which side of p to close for a charge of side from over the
// budget (core.Transport): that side, or, when its input is a batch
// waiting to be flushed, the peer that does not take it.
func (p *pair) Blame(from int) (string, error) {
	if p.holding.pinned[from].Load()+p.holding.handed[from].Load() > 0 {
		return core.SideName[1-from], core.ErrSlowOverBudget
	}
	return core.SideName[from], core.ErrOverBudget
}

// pin records n bytes taken from side from's reader and not yet released;
// unpin, once they are, clears it. A batch below budgetFloor is not
// recorded: it would not be charged on its own, and pinning it would cost
// a store per frame.
func (p *pair) pin(from, n int) {
	if n >= budgetFloor {
		p.holding.pinned[from].Store(int64(n))
	}
}

func (p *pair) unpin(from int) {
	if p.holding.pinned[from].Load() != 0 {
		p.holding.pinned[from].Store(0)
	}
}

// hand charges the n bytes of side from's input that w holds for the
// flush about to start, which may wait long for a slow peer; handBack,
// once the flush is over, gives them back. The caller owns w and is not
// on a poller.
func (p *pair) hand(from int, n int, r netpoll.Reader) bool {
	if n == 0 {
		return true
	}
	p.holding.handed[from].Store(int64(n))
	return p.hold(from, r)
}

func (p *pair) handBack(from int, r netpoll.Reader) {
	if p.holding.handed[from].Load() != 0 {
		p.holding.handed[from].Store(0)
		p.hold(from, r)
	}
}

// nextFrame waits for the next whole frame. While a partial one waits for
// the rest, which netpoll keeps reading (and anything behind it), the pair
// is on the sweep's list, which charges what it holds to the budget.
func (p *pair) nextFrame(r netpoll.Reader, max int) ([]byte, error) {
	n, whole, err := framing.Buffered(r, max)
	if err != nil {
		return nil, err
	}
	if whole {
		return r.Next(n)
	}
	p.waitStart()
	defer p.waitEnd()
	return framing.Next(r, max)
}

// holdInput charges what both sides hold now, for the sweep, and adds to
// over the connection to close if that takes the budget past its bound:
// the largest holder, p or another, chosen by v for the whole sweep. A
// charge refused for another connection's sake is tried again on the
// next sweep, once that one is closed.
func (p *pair) holdInput(over []core.Victim, v *core.Victims) []core.Victim {
	for from, conn := range [2]netpoll.Connection{p.client, p.upstream} {
		o, n := p.charge(from, conn.Reader())
		if !o {
			continue
		}
		if x, ok := v.Choose(p.c, from, n); ok {
			return append(over, x)
		}
		return over
	}
	return over
}

// holds reports whether p has a charge on the budget.
func (p *pair) holds() bool {
	return p.holding.held[fromClient].Load()+p.holding.held[fromUpstream].Load() != 0
}

// Release gives back what a closed pair held (core.Transport). Once
// closed no charge is made (chargeLocked checks it under the same lock),
// so what this gives back stays given back.
func (p *pair) Release() {
	h := &p.holding
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.held[fromClient].Swap(0) + h.held[fromUpstream].Swap(0)
	if n != 0 {
		p.d.k.Budget.Take(-n)
	}
}
