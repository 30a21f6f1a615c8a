package proxy

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/cloudwego/netpoll"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/policy"
	"github.com/kproxy/kproxy/relay"
)

// maxBatchBytes ends a batch so that it is flushed: a client sending
// faster than the upstream takes would otherwise keep one batch growing in
// netpoll's output buffer, where neither the relay's own check nor the
// overflow sweep (which watches relays blocked in a flush) sees it.
const maxBatchBytes = 1 << 20

// throttlePoll is how often a client paused by a throttle is checked for
// having closed.
const throttlePoll = 100 * time.Millisecond

// onClient relays every whole request frame the client has sent, then
// flushes them upstream in one write. netpoll calls it again while unread
// bytes remain.
func (p *pair) onClient(_ context.Context, c netpoll.Connection) error {
	defer p.recoverPanic("client", c)
	r := c.Reader()
	if p.inClient {
		p.relayRequestsInline(r)
		return nil
	}
	p.upMu.Lock() // a raw send handed to a goroutine finishes first
	defer p.upMu.Unlock()
	if p.failing.Load() { // a batch on the poller failed; the pair is closing
		dropInput(r)
		return nil
	}
	for {
		if p.draining.Load() {
			// Send nothing new; whoever writes the last response owed
			// (the response relay, writeAnswers, finishSend) closes the
			// pair when the table empties, or Drain does at its deadline.
			p.closeIfDrained()
			p.waitStart() // what the client sends meanwhile is swept
			<-p.done
			p.waitEnd()
			return nil
		}
		if r.Len() > p.s.cfg.MaxUnreadBytes {
			p.closeOnError("client", relay.ErrOverflow)
			return nil
		}
		if !p.hold(fromClient, r) {
			return nil // closed for the budget
		}
		// A throttle over is cleared by Muted: batches may go on the
		// poller again.
		if d := p.sess.Muted(time.Now()); d > 0 && !nextExempt(r) {
			// Throttled: like a broker, stop reading this client until
			// the delay has passed (heartbeats excepted).
			p.waitStart()
			time.Sleep(min(d, throttlePoll))
			p.waitEnd()
			if p.closed.Load() {
				return nil
			}
			if !c.IsActive() { // netpoll runs no close callback while we hold the handler
				p.close(reasonClientClosed, nil)
				return nil
			}
			continue
		}
		if err := p.relayRequests(r); err != nil {
			p.closeOnError("client", err)
			return nil
		}
		r.Release()
		p.unpin(fromClient)
		if !p.linger(c) {
			p.hold(fromClient, r) // what it charged before is not left counted
			return nil
		}
	}
}

// relayRequests forwards the whole request frames buffered (waiting for
// the first one to complete), up to maxBatchBytes, then flushes them
// upstream in one write.
func (p *pair) relayRequests(r netpoll.Reader) error {
	return relayRequestBatch(p.sess, p.s, r, &p.upBatch, p.FlushUp,
		func(max int) ([]byte, error) { return p.nextFrame(r, max) },
		func(batched int) { p.pin(fromClient, batched) }) // held until the flush is done
}

// FlushUp sends the batch upstream, counting its requests first: their
// responses may be counted as soon as it is sent. It is also the
// session's relay.Link, called before the session waits.
func (p *pair) FlushUp(up *relay.Batch) error {
	p.sess.CountRequests()
	if !p.upLarge.Load() {
		p.s.sockets.large(p.upstream, p.upOut, &p.upLarge, up)
	}
	w := p.upstream.Writer()
	err := p.upOut.writeBatch(w, up)
	if err == nil {
		err = p.flush(w, toUpstream)
	}
	if err != nil {
		return errUpstreamWrite{err}
	}
	return nil
}

// Unread is the client's input not yet relayed (relay.Link).
func (p *pair) Unread() int { return p.client.Reader().Len() }

// WaitStart and WaitEnd bracket a session's wait (relay.Link): the pair is
// then on the overflow sweep's list, since netpoll keeps reading.
func (p *pair) WaitStart() { p.waitStart() }

// WaitEnd ends a wait begun by WaitStart.
func (p *pair) WaitEnd() { p.waitEnd() }

// Gone reports whether the client has closed (relay.Link): netpoll runs
// no close callback while the handler waits.
func (p *pair) Gone() bool { return !p.client.IsActive() }

// Released says the session released the client's input mid-batch
// (relay.Link): nothing is pinned for the flush any more.
func (p *pair) Released() { p.unpin(fromClient) }

// Answer writes kproxy's own answers queued at the head of the table
// (relay.Link). On the poller it must not wait for wmu or the client: a
// goroutine writes them, unless a response ahead of them does first.
func (p *pair) Answer(async bool) error {
	if async {
		go p.writeAnswers()
		return nil
	}
	return p.writeAnswers()
}

// writeAnswers writes kproxy's own answers now at the head of the table to
// the client.
func (p *pair) writeAnswers() error {
	err := p.flushAnswers()
	// An answer of kproxy's own can be the last entry a draining pair
	// owes; no response from the broker will come to close it.
	p.closeIfDrained()
	return err
}

// flushAnswers writes the answers under wmu. While a slow client holds
// up the flush they wait in the client's writer, charged to the budget
// like a batch of responses.
func (p *pair) flushAnswers() error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	cw := p.client.Writer()
	p.sess.Answers(&p.cliBatch)
	err := p.cliOut.writeBatch(cw, &p.cliBatch)
	if err == nil {
		ur := p.upstream.Reader()
		if !p.hand(fromUpstream, cw.MallocLen(), ur) {
			err = errOverBudget // the pair is closed
		} else if err = p.flush(cw, toClient); err != nil {
			err = errClientWrite{err}
		}
		p.handBack(fromUpstream, ur)
	} else {
		err = errClientWrite{err}
	}
	return p.finishBatch(err)
}

// nextExempt reports whether the next buffered request is one a throttle
// never holds back (a heartbeat).
func nextExempt(r framing.Source) bool {
	if r.Len() < 6 {
		return false
	}
	b, err := r.Peek(6)
	return err == nil && policy.Exempt(int16(binary.BigEndian.Uint16(b[4:])))
}

// errUpstreamWrite marks a failure to write to the upstream, so the close
// is blamed on the right side.
type errUpstreamWrite struct{ error }

func (e errUpstreamWrite) Unwrap() error { return e.error }
