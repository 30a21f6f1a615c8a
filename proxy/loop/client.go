package loop

import (
	"context"
	"time"

	"github.com/cloudwego/netpoll"

	"github.com/kproxy/kproxy/proxy/core"
	"github.com/kproxy/kproxy/relay"
)

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
		if p.c.Stopping() {
			// Send nothing new; whoever writes the last response owed
			// (the response relay, writeAnswers, finishSend) closes the
			// pair when the table empties, or Drain does at its deadline.
			p.c.CloseIfDrained()
			p.waitStart() // what the client sends meanwhile is swept
			<-p.c.Done()
			p.waitEnd()
			return nil
		}
		if r.Len() > p.d.k.Limits.MaxUnreadBytes {
			p.fail("client", relay.ErrOverflow)
			return nil
		}
		if !p.hold(fromClient, r) {
			return nil // closed for the budget
		}
		// A throttle over is cleared by the session: batches may go on
		// the poller again.
		if d := p.sess.Held(r); d > 0 {
			// Throttled: like a broker, stop reading this client until
			// the delay has passed (heartbeats excepted).
			p.waitStart()
			time.Sleep(min(d, relay.ThrottlePoll))
			p.waitEnd()
			if p.c.Closed() {
				return nil
			}
			if !c.IsActive() { // netpoll runs no close callback while we hold the handler
				p.c.Close(core.ReasonClientClosed, nil)
				return nil
			}
			continue
		}
		if err := p.relayRequests(r); err != nil {
			p.fail("client", err)
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
// the first one to complete), up to relay.MaxBatchBytes, then flushes
// them upstream in one write.
func (p *pair) relayRequests(r netpoll.Reader) error {
	err := p.sess.RequestBatch(r, &p.upBatch,
		func(max int) ([]byte, error) { return p.nextFrame(r, max) },
		func(batched int) { p.pin(fromClient, batched) }) // held until the flush is done
	if err == nil {
		p.d.k.M.Batch[core.BatchRequests][core.InPool].Inc()
	}
	return err
}

// FlushUp sends the batch upstream, counting its requests first: their
// responses may be counted as soon as it is sent. It is also the
// session's relay.Link, called before the session waits.
func (p *pair) FlushUp(up *relay.Batch) error {
	p.sess.CountRequests()
	if !p.upLarge.Load() {
		p.large(up)
	}
	w := p.upstream.Writer()
	err := p.upOut.writeBatch(w, up)
	if err == nil {
		err = p.flush(w, toUpstream)
	}
	if err != nil {
		return core.UpstreamWriteError{Err: err}
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
// (relay.Link). On the poller it must not wait for WMu or the client: a
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
	p.c.CloseIfDrained()
	return err
}

// flushAnswers writes the answers under WMu. While a slow client holds
// up the flush they wait in the client's writer, charged to the budget
// like a batch of responses.
func (p *pair) flushAnswers() error {
	p.c.WMu.Lock()
	defer p.c.WMu.Unlock()
	cw := p.client.Writer()
	p.sess.Answers(&p.cliBatch)
	err := p.cliOut.writeBatch(cw, &p.cliBatch)
	if err == nil {
		ur := p.upstream.Reader()
		if !p.hand(fromUpstream, cw.MallocLen(), ur) {
			err = core.ErrOverBudget // the pair is closed
		} else if err = p.flush(cw, toClient); err != nil {
			err = core.ClientWriteError{Err: err}
		}
		p.handBack(fromUpstream, ur)
	} else {
		err = core.ClientWriteError{Err: err}
	}
	return p.finishBatch(err)
}
