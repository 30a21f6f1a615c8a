package stream

import (
	"net"
	"sync"
	"sync/atomic"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/proxy/core"
	"github.com/kproxy/kproxy/relay"
)

// stream is a connection relayed by two goroutines over Go's net, one per
// direction: the transport half of a core.Conn for TLS on either side.
// Each goroutine reads whole frames from its side and hands them to the
// connection's relay.Session. A side is read only when its relay is
// ready for more, so a fast peer is held back by TCP rather than
// buffered, and no overflow sweep is needed: what a connection holds is
// its two read buffers (a frame each, at most), charged to
// max_buffered_bytes as they grow.
type stream struct {
	d                *Driver
	c                *core.Conn
	sess             *relay.Session // c.Sess, set before relaying starts
	client, upstream net.Conn
	cr, ur           *streamReader
	uw               streamWriter // owned by the client goroutine
	cw               streamWriter // under the Conn's WMu
	upBatch          relay.Batch  // owned by the client goroutine
	cliBatch         relay.Batch  // under WMu
	// charged is what each side's read buffer has charged to the budget.
	charged [2]atomic.Int64
	// chargeMu serializes a side's charge with Release.
	chargeMu sync.Mutex
	// reqMu is the request side: held by runClient while it relays a
	// batch (not while it waits for one), and by the re-authentication
	// timer (ReauthIdle), which then must not read the client: runClient
	// may be reading it (timerReauth tells Gone and Unread so).
	reqMu       sync.Mutex
	timerReauth atomic.Bool
}

// newStream makes the stream of c over client and upstream; cr, when not
// nil, is the client's reader already made (it holds the head of the
// first request), which then charges this stream.
func newStream(d *Driver, c *core.Conn, client, upstream net.Conn, cr *streamReader) *stream {
	st := &stream{d: d, c: c, client: client, upstream: upstream, cr: cr}
	lim := d.k.Limits
	if st.cr == nil {
		st.cr = newStreamReader(client, lim.ReadTimeout, func(delta int) bool { return st.charge(core.FromClient, delta) })
	}
	st.ur = newStreamReader(upstream, lim.ReadTimeout, func(delta int) bool { return st.charge(core.FromUpstream, delta) })
	st.uw = streamWriter{conn: upstream, stall: lim.WriteTimeout}
	st.cw = streamWriter{conn: client, stall: lim.WriteTimeout}
	return st
}

// charge charges a read buffer's growth past streamReadMin to
// max_buffered_bytes, or gives back what it shrank by. A buffer grows
// only as a frame's bytes arrive, and shrinks when its peer idles, so the
// charge is what the connection holds, about a frame per side at most.
// A growth the budget refuses closes the largest holder, of either
// driver (core.Conn.Hold); false when that is this connection, whose
// growth is then refused.
func (st *stream) charge(from, delta int) bool {
	d := int64(delta)
	if d <= 0 {
		st.chargeMu.Lock()
		give := min(-d, st.charged[from].Load()) // Release may have given back everything already
		st.charged[from].Add(-give)
		st.d.k.Budget.Take(-give)
		st.chargeMu.Unlock()
		return true
	}
	closed := false
	held := st.c.Hold(from, func() (bool, int64) {
		st.chargeMu.Lock()
		defer st.chargeMu.Unlock()
		if st.c.Closed() { // Close moves to closed before it releases the charge
			closed = true
			return false, 0
		}
		if !st.d.k.Budget.Take(d) {
			return true, st.charged[from].Load() + d
		}
		st.charged[from].Add(d)
		return false, 0
	})
	return held && !closed
}

// Charged is what side from's read buffer has charged (core.Transport).
func (st *stream) Charged(from int) int64 { return st.charged[from].Load() }

// Release gives back both sides' charges (core.Transport).
func (st *stream) Release() {
	st.chargeMu.Lock()
	defer st.chargeMu.Unlock()
	st.d.k.Budget.Take(-(st.charged[0].Swap(0) + st.charged[1].Swap(0)))
}

// Blame closes the side whose buffer is over the budget
// (core.Transport): this driver holds no batch for a slow reader.
func (st *stream) Blame(from int) (string, error) { return core.SideName[from], core.ErrOverBudget }

// CloseSockets closes both sides (core.Transport).
func (st *stream) CloseSockets() {
	st.client.Close()
	st.upstream.Close()
}

// runClient relays the client's requests until the connection closes.
func (st *stream) runClient() {
	defer st.recoverPanic("client")
	for {
		if st.c.Stopping() {
			// Send nothing new; the response relay closes the connection
			// once what was sent is answered, or Drain does at its
			// deadline.
			st.c.CloseIfDrained()
			<-st.c.Done()
			return
		}
		// A throttle: like a broker, stop relaying this client's
		// requests until the delay has passed, but look at what it sends
		// every relay.ThrottlePoll: a heartbeat is never held back.
		if d := st.sess.Held(st.cr); d > 0 {
			if err := st.cr.tryFill(6, min(d, relay.ThrottlePoll)); err != nil {
				st.c.CloseOnError("client", err)
				return
			}
			if st.c.Closed() {
				return
			}
			continue
		}
		// The next frame's first byte, unbounded (a client may idle);
		// the rules are read only once it is here.
		err := st.cr.waitFrame()
		if err == nil {
			st.reqMu.Lock()
			err = st.sess.RequestBatch(st.cr, &st.upBatch,
				func(max int) ([]byte, error) { return framing.Next(st.cr, max) }, nil)
			st.reqMu.Unlock()
		}
		if err != nil {
			st.c.CloseOnError("client", err)
			return
		}
		st.d.k.M.Batch[core.BatchRequests][core.InPool].Inc()
		_ = st.cr.Release()
	}
}

// runUpstream relays the upstream's responses until the connection
// closes.
func (st *stream) runUpstream() {
	defer st.recoverPanic("upstream")
	max := st.d.k.Env.Framing.MaxResponseBytes
	for {
		err := st.ur.waitFrame()
		var frame []byte
		if err == nil {
			frame, err = framing.Next(st.ur, max) // the writer is not held while a frame arrives
		}
		if err != nil {
			st.c.CloseOnError("upstream", err)
			return
		}
		if err := st.writeResponses(frame); err != nil {
			return // closed
		}
		_ = st.ur.Release()
		if st.c.Stopping() {
			st.c.CloseIfDrained()
		}
	}
}

// writeResponses relays frame and the responses buffered behind it to the
// client in one write.
func (st *stream) writeResponses(frame []byte) error {
	st.c.WMu.Lock()
	defer st.c.WMu.Unlock()
	err := st.sess.ResponseBatch(st.ur, frame, &st.cliBatch, nil)
	st.d.k.M.Batch[core.BatchResponses][core.InPool].Inc()
	if err == nil {
		if err = st.cw.write(&st.cliBatch); err != nil {
			err = core.ClientWriteError{Err: err}
		}
	}
	return st.finishBatch(err)
}

// finishBatch counts a batch written to the client and ends its spans, or
// fails them and closes the connection. The caller holds WMu.
func (st *stream) finishBatch(err error) error {
	st.cliBatch.Reset()
	st.sess.Written(err == nil)
	st.sess.EndSpans(err == nil)
	if err != nil {
		st.c.CloseOnError("upstream", err)
	}
	return err
}

// FlushUp writes the requests batched so far upstream (relay.Link).
func (st *stream) FlushUp(up *relay.Batch) error {
	st.sess.CountRequests()
	if err := st.uw.write(up); err != nil {
		return core.UpstreamWriteError{Err: err}
	}
	return nil
}

// Unread is the client input read and not yet relayed (relay.Link): at
// most the frame being relayed and what arrived with it.
func (st *stream) Unread() int {
	if st.timerReauth.Load() {
		return 0 // runClient may be reading; it holds no more than a frame
	}
	return st.cr.Len()
}

// WaitStart and WaitEnd (relay.Link) need nothing here: while a relay
// waits its side is not read.
func (st *stream) WaitStart() {}

// WaitEnd ends a wait begun by WaitStart.
func (st *stream) WaitEnd() {}

// Gone reports whether the client has closed (relay.Link). Nothing reads
// the client while its relay waits, so this peeks: a read of what fits in
// the buffer's free space, at most a millisecond, sees the close (what it
// reads is kept for the relay).
func (st *stream) Gone() bool {
	if st.c.Closed() || st.timerReauth.Load() {
		return st.c.Closed() // runClient reads the client meanwhile, and sees its close
	}
	err := st.cr.peekClose()
	return err != nil && !isTimeout(err)
}

// Released (relay.Link): nothing is pinned by this driver.
func (st *stream) Released() {}

// Answer writes kproxy's own answers at the head of the table to the
// client (relay.Link). This driver's relays may always wait, so it is
// written at once.
func (st *stream) Answer(bool) error {
	err := st.writeAnswers()
	// An answer of kproxy's own can be the last entry a draining
	// connection owes; no response from the broker will come to close it.
	st.c.CloseIfDrained()
	return err
}

// writeAnswers writes the answers under WMu.
func (st *stream) writeAnswers() error {
	st.c.WMu.Lock()
	defer st.c.WMu.Unlock()
	st.sess.Answers(&st.cliBatch)
	err := st.cw.write(&st.cliBatch)
	if err != nil {
		err = core.ClientWriteError{Err: err}
	}
	return st.finishBatch(err)
}

// recoverPanic closes the connection whose relay panicked; the others go
// on.
func (st *stream) recoverPanic(side string) {
	if r := recover(); r != nil {
		st.c.LogPanic(side, r)
		st.c.Close(core.ReasonPanic, core.ErrPanicked)
	}
}

// ReauthIdle re-authenticates the upstream connection now if it is due
// and runClient is waiting for the client rather than relaying
// (core.Reauther): a batch being relayed re-authenticates itself first.
func (st *stream) ReauthIdle() error {
	if !st.reqMu.TryLock() {
		return nil
	}
	defer st.reqMu.Unlock()
	if st.c.Stopping() {
		return nil
	}
	st.timerReauth.Store(true)
	defer st.timerReauth.Store(false)
	return st.sess.Reauthenticate(&st.upBatch)
}
