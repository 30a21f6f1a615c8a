package loop

import (
	"errors"

	"github.com/cloudwego/netpoll"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/proxy/core"
)

// relayRequestsInline relays, on the poller, the requests that
// clientInline found buffered (all whole) and writes them upstream without
// blocking. What the socket does not take is flushed by a goroutine that
// keeps upMu until it is done, so nothing overtakes it.
func (p *pair) relayRequestsInline(r netpoll.Reader) {
	max := p.d.k.Env.Framing.MaxRequestBytes
	var err error
	for err == nil && r.Len() >= framing.SizeLen {
		var frame []byte
		if frame, err = framing.Next(r, max); err == nil {
			err = p.sess.Request(frame, &p.up.iov, false)
		}
	}
	if errors.Is(err, correlate.ErrDraining) {
		// Not sent, nor is what follows (each is refused the same way
		// when netpoll calls again for it); what was pushed before goes.
		err = nil
	}
	p.sess.CountRequests()
	p.d.k.M.Batch[core.BatchRequests][core.OnPoller].Inc()
	if err == nil {
		var all bool
		if all, err = p.up.send(); err != nil {
			err = core.UpstreamWriteError{Err: err}
		} else if !all {
			p.upHanded = true // runTask hands upMu to a goroutine that flushes w
		}
	}
	if err != nil {
		p.up.iov.Reset()
		p.abandon(r, "client", err)
		return
	}
	r.Release()
}

// relayResponsesInline relays, on the poller, the responses that
// upstreamInline found buffered (all whole) and writes them to the client
// without blocking; the caller holds WMu.
func (p *pair) relayResponsesInline(r netpoll.Reader) {
	max := p.d.k.Env.Framing.MaxResponseBytes
	var err error
	for err == nil && r.Len() >= framing.SizeLen {
		var frame []byte
		if frame, err = framing.Next(r, max); err == nil {
			err = p.sess.Response(frame, &p.cli.iov)
		}
	}
	p.d.k.M.Batch[core.BatchResponses][core.OnPoller].Inc()
	if err == nil {
		var all bool
		if all, err = p.cli.send(); err != nil {
			err = core.ClientWriteError{Err: err}
		} else if !all {
			p.clientHanded = true // runTask hands WMu to a goroutine that flushes w
		}
	}
	if !p.clientHanded { // else finishSend counts the batch once it is flushed
		p.sess.Written(err == nil)
	}
	if err != nil {
		p.cli.iov.Reset()
		p.sess.EndSpans(false)
		p.abandon(r, "upstream", err)
		return
	}
	// The spans read the response bytes, which Release gives back.
	p.sess.EndSpans(true)
	r.Release()
	// The caller holds WMu: drained means every response is written, but
	// for what a goroutine still flushes (finishSend checks after it).
	if p.c.Stopping() && !p.clientHanded && p.sess.Drained() {
		go p.c.Close(core.ReasonDrained, nil)
	}
}

// finishSend flushes what a raw send left in w, from a goroutine since it
// may wait for the peer, then lets the next writer in. What waits in w is
// charged to the budget meanwhile, as the input of the side the batch
// came from (written to side to, read from side 1-to): a slow reader would
// otherwise keep up to inlineMaxBytes per side uncounted until
// write_timeout. Responses are counted once flushed, and not if the flush
// fails. On error the pair is closed first, so no one writes behind a
// remainder netpoll still holds.
func (p *pair) finishSend(w netpoll.Writer, to int, owner interface{ Unlock() }, side string, wrap func(error) error) {
	from := 1 - to
	in := p.client.Reader()
	if from == fromUpstream {
		in = p.upstream.Reader()
	}
	var err error
	if p.hold(from, in) { // runTask set handed before it started this
		err = p.flush(w, to)
	} else {
		err = core.ErrOverBudget // the pair is closed
	}
	p.handBack(from, in)
	if to == toClient {
		p.sess.Written(err == nil) // under WMu, which owner is
	}
	if err != nil {
		p.fail(side, wrap(err))
	}
	owner.Unlock()
	p.c.CloseIfDrained() // the last responses of a drain may have been these
}

// abandon ends an inline batch that failed. The input left is dropped, or
// netpoll would call the handler again for it; the pair is marked failing
// at once, so nothing more is relayed, and closed from another goroutine,
// since closing a connection from its poller can hang it.
func (p *pair) abandon(r netpoll.Reader, side string, err error) {
	p.failing.Store(true)
	dropInput(r)
	go p.fail(side, err)
}

// dropInput discards what r holds. A handler that will not relay it must
// still consume it: netpoll calls the handler again while input remains.
func dropInput(r netpoll.Reader) {
	_ = r.Skip(r.Len())
	r.Release()
}
