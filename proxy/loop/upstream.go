package loop

import (
	"context"

	"github.com/cloudwego/netpoll"

	"github.com/kproxy/kproxy/proxy/core"
	"github.com/kproxy/kproxy/relay"
)

// onUpstream relays every whole response the upstream has sent to the
// client, each matched to the head of the in-flight table and given back
// the client's correlation id, then flushes them in one write.
func (p *pair) onUpstream(_ context.Context, c netpoll.Connection) error {
	defer p.recoverPanic("upstream", c)
	r := c.Reader()
	if p.inUpstream {
		p.relayResponsesInline(r)
		return nil
	}
	if p.failing.Load() { // a batch on the poller failed; the pair is closing
		dropInput(r)
		return nil
	}
	for {
		if r.Len() > p.d.k.Limits.MaxUnreadBytes {
			p.fail("upstream", relay.ErrOverflow)
			return nil
		}
		if !p.hold(fromUpstream, r) {
			return nil // closed for the budget
		}
		if err := p.relayResponses(r); err != nil {
			p.fail("upstream", err)
			return nil
		}
		r.Release()
		p.unpin(fromUpstream)
		if p.c.Stopping() {
			p.c.CloseIfDrained()
			if p.c.Closed() {
				return nil
			}
		}
		if !p.linger(c) {
			p.hold(fromUpstream, r) // what it charged before is not left counted
			return nil
		}
	}
}

// relayResponses delivers the whole responses buffered (waiting for the
// first one to complete), up to relay.MaxBatchBytes, and flushes them to
// the client in one write.
func (p *pair) relayResponses(r netpoll.Reader) error {
	max := p.d.k.Env.Framing.MaxResponseBytes
	// Wait for the first whole frame before taking the writer, so a slow
	// partial frame never holds it.
	frame, err := p.nextFrame(r, max)
	if err != nil {
		return err
	}
	batched := len(frame)
	p.pin(fromUpstream, batched) // held until the flush is done, also while it waits for the writer
	p.c.WMu.Lock()
	defer p.c.WMu.Unlock()
	out := &p.cliBatch
	err = p.sess.ResponseBatch(r, frame, out, func(batched int) { p.pin(fromUpstream, batched) })
	p.d.k.M.Batch[core.BatchResponses][core.InPool].Inc()
	w := p.client.Writer()
	if err == nil {
		if err = p.cliOut.writeBatch(w, out); err == nil {
			err = p.flush(w, toClient)
		}
		if err != nil {
			err = core.ClientWriteError{Err: err}
		}
	}
	out.Reset()
	return p.finishBatch(err)
}

// finishBatch ends the spans of a batch written to the client and counts
// its responses and bytes. On error it counts neither, fails the spans
// and closes the pair before WMu is let go, so no one else
// flushes a writer that still points into buffers about to be freed. The
// caller holds WMu.
func (p *pair) finishBatch(err error) error {
	p.sess.Written(err == nil)
	p.sess.EndSpans(err == nil)
	if err != nil {
		p.fail("upstream", err)
	}
	return err
}
