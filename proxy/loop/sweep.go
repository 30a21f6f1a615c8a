package loop

import (
	"time"

	"github.com/cloudwego/netpoll"

	"github.com/kproxy/kproxy/proxy/core"
	"github.com/kproxy/kproxy/relay"
)

// overflowSweep is how often the pairs whose relay is blocked are checked
// against max_unread_bytes. netpoll reads whatever arrives, so at loopback
// rates (~400 MB/s from one client) memory can pass the bound by about this
// period's worth of input before the pair is closed.
const overflowSweep = 10 * time.Millisecond

// flush writes w's batch to side to (toClient, toUpstream). A relay
// blocked here (the peer reads slowly or not at all) cannot check its other
// side's unread input, which netpoll keeps growing, so it is marked for the
// overflow sweep meanwhile; the sweep also closes the pair if the flush
// makes no progress for write_timeout.
func (p *pair) flush(w netpoll.Writer, to int) error {
	p.waitStart()
	p.flushes[to].Add(1)
	err := w.Flush()
	p.flushes[to].Add(1)
	p.waitEnd()
	return err
}

// waitStart marks one of the pair's relays as waiting (a flush, a full
// table, a throttle) and puts the pair on the sweep's list if it is not
// there yet. The list keeps the sweep's cost to the pairs that waited
// lately: walking every pair each sweep cost 17% of a core with 9,900
// idle clients. A pair leaves the list once keepIdleSweeps sweeps in a
// row found it not waiting.
func (p *pair) waitStart() {
	p.blocked.Add(1)
	p.list()
}

// list puts the pair on the sweep's list if it is not there yet. The
// sweep's own charges never call it: a pair it charges is listed.
func (p *pair) list() {
	if p.swept.Load() {
		return
	}
	s := p.d
	s.waitMu.Lock()
	if !p.swept.Load() {
		p.swept.Store(true)
		s.waiting = append(s.waiting, p)
		if len(s.waiting) == 1 {
			select { // wake a sweep that sleeps on an empty list
			case s.waitKick <- struct{}{}:
			default:
			}
		}
	}
	s.waitMu.Unlock()
}

// keepIdleSweeps is how many sweeps in a row must find a listed pair not
// waiting before it leaves the list. A busy pair flushes every batch; kept
// for 100 ms it takes waitMu to rejoin about 10 times a second, not 100.
const keepIdleSweeps = 10

// waitEnd ends a wait begun by waitStart.
func (p *pair) waitEnd() { p.blocked.Add(-1) }

// watchOverflow closes, every overflowSweep, the pairs sweepWaiting finds
// at fault: a waiting pair whose unread input on either side has passed
// max_unread_bytes (a relay that is not waiting checks this itself between
// batches), or whose flush has stalled for write_timeout, and the largest
// holder when a listed pair's input would take the budget past
// max_buffered_bytes. Without it one client flooding an upstream that has
// stopped reading grows memory until write_timeout. While no pair is
// listed it sleeps, so idle kproxy is not woken 100 times a second.
func (s *Driver) watchOverflow() {
	t := time.NewTimer(overflowSweep)
	defer t.Stop()
	var over []core.Victim
	for {
		select {
		case <-s.k.Done():
			return
		case <-t.C:
		}
		var empty bool
		over, empty = s.sweepWaiting(over[:0])
		for _, o := range over {
			o.Conn.CloseOnError(o.Side, o.Err)
		}
		clear(over)
		if empty {
			select {
			case <-s.k.Done():
				return
			case <-s.waitKick:
			}
		}
		t.Reset(overflowSweep)
	}
}

// sweepWaiting charges what every listed pair holds to the budget, and
// adds to over the pairs to close: for a charge the budget refuses, the
// largest holder (chosen once per sweep); a waiting pair whose unread
// input has passed max_unread_bytes; a flush stalled for write_timeout. It
// drops from the list the pairs that have not waited for keepIdleSweeps
// sweeps and hold no charge, and reports whether the list is now empty.
//
// A pair is dropped only if, after its mark is cleared, it is still seen
// not waiting and holding nothing: a relay that starts waiting or stores a
// charge meanwhile either saw the mark (and so added to blocked or held
// before this check) or lists the pair again under waitMu once this sweep
// lets go of it.
func (s *Driver) sweepWaiting(over []core.Victim) ([]core.Victim, bool) {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	now := time.Now()
	kept := s.waiting[:0]
	var c core.Victims
	for _, p := range s.waiting {
		// Every listed pair's input is charged: a pair not waiting now
		// may have been charged while it waited.
		if !p.c.Closed() {
			over = p.holdInput(over, &c)
		}
		if p.blocked.Load() == 0 {
			// Not waiting: its relay checks for itself. A pair that still
			// holds a charge stays until a sweep finds it holds nothing:
			// what is left may be relayed on the poller, which charges
			// nothing, and the charge would stick to an idle pair.
			if p.idleSweeps++; p.idleSweeps < keepIdleSweeps || p.holds() && !p.c.Closed() {
				kept = append(kept, p)
				continue
			}
			p.swept.Store(false)
			if p.blocked.Load() == 0 && (!p.holds() || p.c.Closed()) {
				p.idleSweeps = 0
				continue
			}
			p.swept.Store(true)
		}
		p.idleSweeps = 0
		kept = append(kept, p)
		if p.c.Closed() {
			continue
		}
		switch max := s.k.Limits.MaxUnreadBytes; {
		case p.client.Reader().Len() > max:
			over = append(over, core.Victim{Conn: p.c, Side: "client", Err: relay.ErrOverflow})
		case p.upstream.Reader().Len() > max:
			over = append(over, core.Victim{Conn: p.c, Side: "upstream", Err: relay.ErrOverflow})
		case p.stalled(toClient, now):
			over = append(over, core.Victim{Conn: p.c, Side: "client", Err: core.ErrWriteStalled})
		case p.stalled(toUpstream, now):
			over = append(over, core.Victim{Conn: p.c, Side: "upstream", Err: core.ErrWriteStalled})
		}
	}
	clear(s.waiting[len(kept):])
	s.waiting = kept
	if len(kept) == 0 {
		select { // a kick from a pair swept away already is stale
		case <-s.waitKick:
		default:
		}
	}
	return over, len(kept) == 0
}
