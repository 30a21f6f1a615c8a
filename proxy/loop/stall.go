package loop

import "time"

// Sides a flush writes to: indexes of pair.flushes and pair.stalls. They
// number the sockets as fromClient and fromUpstream do (budget.go), but a
// batch written to side to was read from side 1-to.
const (
	toClient, toUpstream = 0, 1
)

// stallWatch is the sweep's view of one side's flush: which flush it is
// (by pair.flushes), the peer's acknowledged byte count when last
// sampled, and when it last moved.
type stallWatch struct {
	flush    uint64
	acked    uint64
	progress time.Time
	sampled  time.Time
}

// stalled reports whether the flush under way to side to has moved no
// byte for write_timeout. Progress is the peer's TCP acknowledgements
// (bytes it took into its receive buffer), sampled every few sweeps; where
// they cannot be read, the flush's whole time counts, as netpoll's own
// write timeout did. A consumer reading a large response slowly but
// steadily is never cut off; one that stops reading is, write_timeout
// after its buffers filled. One that takes a segment every write_timeout
// keeps its batch (up to a maximum-size frame) that long, but the batch is
// charged to max_buffered_bytes meanwhile (holding.pinned, or
// holding.handed for what a send on the poller left), so together such
// readers hold no more than the budget, and the largest is closed first.
// Called by the sweep under waitMu.
func (p *pair) stalled(to int, now time.Time) bool {
	seq := p.flushes[to].Load()
	w := &p.stalls[to]
	if seq&1 == 0 { // not flushing
		return false
	}
	raw := p.cli
	if to == toUpstream {
		raw = p.up
	}
	if seq != w.flush { // a flush not seen before: progress counts from now
		acked, _ := raw.acked()
		*w = stallWatch{flush: seq, acked: acked, progress: now, sampled: now}
		return false
	}
	timeout := p.d.k.Limits.WriteTimeout
	if now.Sub(w.sampled) >= min(max(timeout/8, overflowSweep), time.Second) {
		w.sampled = now
		if acked, ok := raw.acked(); ok && acked != w.acked {
			w.acked, w.progress = acked, now
		}
	}
	return now.Sub(w.progress) >= timeout
}
