package proxy

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/cloudwego/netpoll"

	"github.com/kproxy/kproxy/framing"
)

// Sides whose input kproxy holds: indexes of pair.held, pinned and
// handed. Like toClient and toUpstream (stall.go) they number the two
// sockets, 0 the client and 1 the upstream, but say what is read from a
// socket, not what is written to it: input read from side i is written to
// side 1-i.
const (
	fromClient, fromUpstream = 0, 1
)

// budgetFloor is the input per side below which nothing is charged to
// max_buffered_bytes, so relaying small frames never touches the shared
// counter. A side's unread input, the batch pinned for its flush and what
// a poller's send handed to a goroutine are charged together, so what goes
// uncounted is at most 2 x budgetFloor per connection.
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

// take adds delta to what is used, unless that would take it past max.
// used never passes max, not even for an instant: a charge that would
// have been undone could get another pair's charge refused meanwhile, and
// a pair closed for nothing.
func (b *budget) take(delta int64) bool {
	if delta <= 0 {
		b.used.Add(delta)
		return true
	}
	for {
		used := b.used.Load()
		if used+delta > b.max {
			return false
		}
		if b.used.CompareAndSwap(used, used+delta) {
			return true
		}
	}
}

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
	// Set by whoever owns that writer (upMu for fromClient, wmu for
	// fromUpstream), charged with the reader's Len like pinned.
	handed [2]atomic.Int64
}

// hold charges what side from of p holds now: what its reader r has
// buffered plus the batch pinned or handed for a flush. When that would
// take the budget past max_buffered_bytes, the largest holder is closed:
// another pair, after which the charge is tried again, or p itself, when
// hold reports false. So a hog that stopped growing is closed, not the
// next honest client to buffer a frame. The caller must not be on a
// poller (closing waits for the victim's poller task).
func (p *pair) hold(from int, r netpoll.Reader) bool {
	for {
		over, n := p.charge(from, r)
		if !over {
			return true
		}
		var c victims // one walk of every pair (O(N) under Server.mu) per refused charge
		o, ok := c.choose(p, from, n)
		if !ok {
			continue // a closing pair's charge was given back: try again
		}
		o.p.closeOnError(o.side, o.err)
		if o.p == p {
			return false
		}
		o.p.releaseHeld() // if another goroutine closes it, its charge is freed now
	}
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
	if p.closed.Load() { // close sets it before it releases the charge
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
	if !p.s.budget.take(delta) {
		return true, n, true
	}
	h.held[from].Store(n)
	return false, 0, n == 0 || p.swept.Load()
}

// victims chooses the pairs to close for charges the budget refused. The
// largest holder is found by walking every pair, under Server.mu: the
// sweep keeps one for all the charges it refuses, so it walks them once,
// and closes that pair once.
type victims struct {
	walked bool
	big    *pair // the largest open holder the walk found, or nil
	most   int64 // what it holds
	chosen bool  // big has been chosen already
	freed  bool  // the walk gave back a closing pair's charge
}

// choose returns the pair to close for a refused charge of side from of p
// to n bytes: the largest holder, another pair if it holds more than p
// would, else p itself, blamed on the side that holds most of that. It
// reports false, choosing none, if that pair was chosen before (its close
// makes room) or if the walk gave back a closing pair's charge (the
// charge may fit now).
func (c *victims) choose(p *pair, from int, n int64) (overflowing, bool) {
	if !c.walked {
		c.walked = true
		c.big, c.most, c.freed = p.s.largest()
	}
	if c.freed {
		return overflowing{}, false
	}
	other := p.holding.held[1-from].Load()
	v := c.big
	if v == nil || c.most <= n+other {
		v = p
	}
	if v == c.big {
		if c.chosen {
			return overflowing{}, false
		}
		c.chosen = true
	}
	if v != p {
		return v.overBudget(), true
	}
	if other > n {
		from = 1 - from
	}
	return p.overBudgetFrom(from), true
}

// largest returns the open pair that holds the most, and how much; of
// pairs that hold as much, the oldest, so that the sweep and a relay
// walking at once choose the same one, and close one pair, not two. A
// closed pair whose close has not yet given back its charge has it given
// back now, and freed says so: a charge refused meanwhile is tried again
// rather than closing a second pair. It walks every pair, but only when
// the budget is full.
func (s *Server) largest() (big *pair, most int64, freed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for q := range s.pairs {
		if q.closed.Load() {
			if q.holds() {
				q.releaseHeld()
				freed = true
			}
			continue
		}
		n := q.holding.held[fromClient].Load() + q.holding.held[fromUpstream].Load()
		if n > most || n == most && n > 0 && q.opened.Before(big.opened) {
			big, most = q, n
		}
	}
	return big, most, freed
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
	if p.holding.pinned[from].Load()+p.holding.handed[from].Load() > 0 {
		return overflowing{p, sideName[1-from], errSlowOverBudget}
	}
	return overflowing{p, sideName[from], errOverBudget}
}

// sideName is each side as logged and counted.
var sideName = [2]string{fromClient: "client", fromUpstream: "upstream"}

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
// over the pair to close if that takes the budget past its bound: the
// largest holder, p or another, chosen by c for the whole sweep. A charge
// refused for another pair's sake is tried again on the next sweep, once
// that pair is closed.
func (p *pair) holdInput(over []overflowing, c *victims) []overflowing {
	for from, conn := range [2]netpoll.Connection{p.client, p.upstream} {
		o, n := p.charge(from, conn.Reader())
		if !o {
			continue
		}
		if v, ok := c.choose(p, from, n); ok {
			return append(over, v)
		}
		return over
	}
	return over
}

// holds reports whether p has a charge on the budget.
func (p *pair) holds() bool {
	return p.holding.held[fromClient].Load()+p.holding.held[fromUpstream].Load() != 0
}

// releaseHeld gives back what a closed pair held. Once closed is set no
// charge is made (chargeLocked checks it under the same lock), so what
// this gives back stays given back.
func (p *pair) releaseHeld() {
	h := &p.holding
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.held[fromClient].Swap(0) + h.held[fromUpstream].Swap(0)
	if n != 0 {
		p.s.budget.used.Add(-n)
	}
}
