package proxy

import (
	"errors"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/relay"
)

// stream is a pair relayed by two goroutines over Go's net, one per
// direction: the driver for TLS on either side. Each goroutine reads whole
// frames from its side and hands them to the same relay.Session the
// netpoll driver uses. A side is read only when its relay is ready for
// more, so a fast peer is held back by TCP rather than buffered, and no
// overflow sweep is needed: what a pair holds is its two read buffers (a
// frame each, at most), charged to max_buffered_bytes as they grow.
type stream struct {
	s                *Server
	log              zerolog.Logger
	client, upstream net.Conn
	sess             *relay.Session
	cr, ur           *streamReader
	uw               streamWriter // owned by the client goroutine
	cw               streamWriter // under wmu
	wmu              sync.Mutex   // serializes writes to the client
	upBatch          relay.Batch  // owned by the client goroutine
	cliBatch         relay.Batch  // under wmu
	opened           time.Time
	charged          atomic.Int64 // what the read buffers charged to the budget
	draining         atomic.Bool
	closed           atomic.Bool
	done             chan struct{}
}

func newStream(s *Server, log zerolog.Logger, client, upstream net.Conn) *stream {
	st := &stream{s: s, log: log, client: client, upstream: upstream, opened: time.Now(), done: make(chan struct{})}
	st.cr = newStreamReader(client, s.framing.ReadTimeout, st.charge)
	st.ur = newStreamReader(upstream, s.framing.ReadTimeout, st.charge)
	st.uw = streamWriter{conn: upstream, stall: s.cfg.WriteTimeout}
	st.cw = streamWriter{conn: client, stall: s.cfg.WriteTimeout}
	return st
}

// charge charges a read buffer's growth past streamReadMin to
// max_buffered_bytes, or gives back what it shrank by; a growth that
// would pass the bound is refused (the pair is closed). A buffer grows
// only as a frame's bytes arrive, and shrinks when its peer idles, so the
// charge is what the pair holds, about a frame per side at most; it is
// this pair, not the largest holder, that gives way.
func (st *stream) charge(delta int) bool {
	d := int64(delta)
	if d > 0 && (st.closed.Load() || !st.s.budget.take(d)) {
		return false
	}
	if d < 0 {
		// Given back only what is still charged: close may have given
		// back everything already.
		for {
			c := st.charged.Load()
			give := min(-d, c)
			if st.charged.CompareAndSwap(c, c-give) {
				st.s.budget.take(-give)
				return true
			}
		}
	}
	st.charged.Add(d)
	if st.closed.Load() { // close may have given back the charge before this one
		st.s.budget.take(-st.charged.Swap(0))
	}
	return true
}

// runClient relays the client's requests until the pair closes.
func (st *stream) runClient() {
	defer st.recoverPanic("client")
	for {
		if st.draining.Load() {
			// Send nothing new; the response relay closes the pair once
			// what was sent is answered, or Drain does at its deadline.
			st.closeIfDrained()
			<-st.done
			return
		}
		// A throttle: like a broker, stop relaying this client's
		// requests until the delay has passed, but look at what it sends
		// every throttlePoll: a heartbeat is never held back.
		if d := st.muted(); d > 0 && !nextExempt(st.cr) {
			if err := st.cr.tryFill(6, min(d, throttlePoll)); err != nil {
				st.closeOnError("client", err)
				return
			}
			if st.closed.Load() {
				return
			}
			continue
		}
		// The next frame's first byte, unbounded (a client may idle);
		// the rules are read only once it is here.
		err := st.cr.waitFrame()
		if err == nil {
			err = relayRequestBatch(st.sess, st.s, st.cr, &st.upBatch, st.FlushUp,
				func(max int) ([]byte, error) { return framing.Next(st.cr, max) }, nil)
		}
		if err != nil {
			st.closeOnError("client", err)
			return
		}
		_ = st.cr.Release()
	}
}

// muted is how long a throttle still holds the client back; the clock is
// read only when one was set.
func (st *stream) muted() time.Duration {
	if !st.sess.MayMute() {
		return 0
	}
	return st.sess.Muted(time.Now())
}

// runUpstream relays the upstream's responses until the pair closes.
func (st *stream) runUpstream() {
	defer st.recoverPanic("upstream")
	max := st.s.framing.MaxResponseBytes
	for {
		err := st.ur.waitFrame()
		var frame []byte
		if err == nil {
			frame, err = framing.Next(st.ur, max) // the writer is not held while a frame arrives
		}
		if err != nil {
			st.closeOnError("upstream", err)
			return
		}
		if err := st.writeResponses(frame); err != nil {
			return // closed
		}
		_ = st.ur.Release()
		if st.draining.Load() {
			st.closeIfDrained()
		}
	}
}

// writeResponses relays frame and the responses buffered behind it to the
// client in one write.
func (st *stream) writeResponses(frame []byte) error {
	st.wmu.Lock()
	defer st.wmu.Unlock()
	err := relayResponseBatch(st.sess, st.s, st.ur, frame, &st.cliBatch, nil)
	if err == nil {
		if err = st.cw.write(&st.cliBatch); err != nil {
			err = errClientWrite{err}
		}
	}
	return st.finishBatch(err)
}

// finishBatch counts a batch written to the client and ends its spans, or
// fails them and closes the pair. The caller holds wmu.
func (st *stream) finishBatch(err error) error {
	st.cliBatch.Reset()
	st.sess.Written(err == nil)
	st.sess.EndSpans(err == nil)
	if err != nil {
		st.closeOnError("upstream", err)
	}
	return err
}

// FlushUp writes the requests batched so far upstream (relay.Link).
func (st *stream) FlushUp(up *relay.Batch) error {
	st.sess.CountRequests()
	if err := st.uw.write(up); err != nil {
		return errUpstreamWrite{err}
	}
	return nil
}

// Unread is the client input read and not yet relayed (relay.Link): at
// most the frame being relayed and what arrived with it.
func (st *stream) Unread() int { return st.cr.Len() }

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
	if st.closed.Load() {
		return true
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
	// An answer of kproxy's own can be the last entry a draining pair
	// owes; no response from the broker will come to close it.
	st.closeIfDrained()
	return err
}

// writeAnswers writes the answers under wmu.
func (st *stream) writeAnswers() error {
	st.wmu.Lock()
	defer st.wmu.Unlock()
	st.sess.Answers(&st.cliBatch)
	err := st.cw.write(&st.cliBatch)
	if err != nil {
		err = errClientWrite{err}
	}
	return st.finishBatch(err)
}

// drain asks the pair to finish what is in flight, take nothing new, and
// close (see pair.drain).
func (st *stream) drain() {
	st.draining.Store(true)
	if st.sess.Drain() {
		go st.closeIfDrained()
	}
}

// closeIfDrained closes a draining pair once every response owed has been
// written to the client (read under wmu, as pair.closeIfDrained does).
func (st *stream) closeIfDrained() {
	if !st.draining.Load() {
		return
	}
	st.wmu.Lock()
	drained := st.sess.Drained()
	st.wmu.Unlock()
	if drained {
		st.close(reasonDrained, nil)
	}
}

// closeOnError closes the pair for an error met relaying from side,
// counting and logging it by kind.
func (st *stream) closeOnError(side string, err error) {
	if st.closed.Load() {
		return
	}
	c := st.s.classify(side, err, &st.log)
	if st.close(c.reason, c.err) {
		st.s.closedFor(c)
	}
}

// close shuts both sides once, fails what is still in flight and logs one
// line for the connection. It reports whether this call closed the pair.
func (st *stream) close(reason string, err error) bool {
	if !st.closed.CompareAndSwap(false, true) {
		return false
	}
	st.client.Close()
	st.upstream.Close()
	st.s.budget.take(-st.charged.Swap(0))
	failed := st.sess.Close()
	st.s.m.open.Dec()
	unregister(st.s, st.s.streams, st)
	close(st.done)
	logClosed(st.log, reason, err, st.opened, st.sess.Stats(), failed)
	return true
}

// recoverPanic closes the pair whose relay panicked; other pairs go on.
func (st *stream) recoverPanic(side string) {
	if r := recover(); r != nil {
		st.log.Error().Str("side", side).Interface("panic", r).Bytes("stack", debug.Stack()).Msg("relay panicked")
		st.close("panic", errors.New("relay panicked"))
	}
}
