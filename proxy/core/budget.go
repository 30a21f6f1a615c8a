package core

import "sync/atomic"

// Budget is the process-wide count of the bytes kproxy holds in partial
// frames, unread input and batches being flushed, against
// max_buffered_bytes. netpoll reads without backpressure, so each
// connection's own bound (max_unread_bytes) still lets many connections
// together hold far more than the machine has; this bounds their sum,
// whichever driver holds the bytes.
type Budget struct {
	max  int64
	used atomic.Int64
}

// Take adds delta to what is used, unless that would take it past max.
// used never passes max, not even for an instant: a charge that would
// have been undone could get another connection's charge refused
// meanwhile, and a connection closed for nothing.
func (b *Budget) Take(delta int64) bool {
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

// Used is what is charged now.
func (b *Budget) Used() int64 { return b.used.Load() }

// Max is max_buffered_bytes.
func (b *Budget) Max() int64 { return b.max }

// Hold charges side from of c through charge, which sets what that side
// holds and reports whether the budget refused it (with the n bytes it
// would have charged). When refused, the largest holder is closed:
// another connection, after which the charge is tried again, or c
// itself, when Hold reports false. So a hog that stopped growing is
// closed, not the next honest client to buffer a frame. The caller must
// not be on netpoll's poller (closing waits for the victim's tasks).
func (c *Conn) Hold(from int, charge func() (over bool, n int64)) bool {
	for {
		over, n := charge()
		if !over {
			return true
		}
		var v Victims // one walk of every connection per refused charge
		o, ok := v.Choose(c, from, n)
		if !ok {
			continue // a closing connection's charge was given back: try again
		}
		o.Conn.CloseOnError(o.Side, o.Err)
		if o.Conn == c {
			return false
		}
		o.Conn.t.Release() // if another goroutine closes it, its charge is freed now
	}
}

// Victim is a connection to close, the side at fault and why.
type Victim struct {
	Conn *Conn
	Side string
	Err  error
}

// Victims chooses the connections to close for charges the budget
// refused. The largest holder is found by walking every connection of
// the registry, both drivers': a caller with many refused charges (a
// driver's sweep) keeps one Victims for all of them, so it walks once
// and closes that connection once.
type Victims struct {
	walked bool
	big    *Conn // the largest open holder the walk found, or nil
	most   int64 // what it holds
	chosen bool  // big has been chosen already
	freed  bool  // the walk gave back a closing connection's charge
}

// Choose returns the connection to close for a refused charge of side
// from of c to n bytes: the largest holder, another connection if it
// holds more than c would, else c itself, blamed on the side that holds
// most of that. It reports false, choosing none, if that connection was
// chosen before (its close makes room) or if the walk gave back a
// closing connection's charge (the charge may fit now).
func (v *Victims) Choose(c *Conn, from int, n int64) (Victim, bool) {
	if !v.walked {
		v.walked = true
		v.big, v.most, v.freed = c.core.largest()
	}
	if v.freed {
		return Victim{}, false
	}
	other := c.t.Charged(1 - from)
	o := v.big
	if o == nil || v.most <= n+other {
		o = c
	}
	if o == v.big {
		if v.chosen {
			return Victim{}, false
		}
		v.chosen = true
	}
	if o != c {
		from = FromClient
		if o.t.Charged(FromUpstream) > o.t.Charged(FromClient) {
			from = FromUpstream
		}
	} else if other > n {
		from = 1 - from
	}
	side, err := o.t.Blame(from)
	return Victim{o, side, err}, true
}

// largest returns the open connection that holds the most, and how much;
// of connections that hold as much, the oldest, so that a sweep and a
// relay walking at once choose the same one, and close one connection,
// not two. A closed connection whose close has not yet given back its
// charge has it given back now, and freed says so: a charge refused
// meanwhile is tried again rather than closing a second connection. It
// walks every connection, but only when the budget is full.
func (k *Core) largest() (big *Conn, most int64, freed bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for q := range k.conns {
		n := q.t.Charged(FromClient) + q.t.Charged(FromUpstream)
		if q.Closed() {
			if n != 0 {
				q.t.Release()
				freed = true
			}
			continue
		}
		if n > most || n == most && n > 0 && q.Opened.Before(big.Opened) {
			big, most = q, n
		}
	}
	return big, most, freed
}
