package proxy

import (
	"errors"

	"github.com/cloudwego/netpoll"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
)

// relayRequestsInline relays, on the poller, the requests that
// clientInline found buffered (all whole) and writes them upstream without
// blocking. What the socket does not take is flushed by a goroutine that
// keeps upMu until it is done, so nothing overtakes it.
func (p *pair) relayRequestsInline(r netpoll.Reader) {
	w := p.upstream.Writer()
	max := p.s.framing.MaxRequestBytes
	var err error
	for err == nil && r.Len() >= framing.SizeLen {
		var frame []byte
		if frame, err = framing.Next(r, max); err == nil {
			err = p.forward(frame, r, w)
		}
	}
	if errors.Is(err, correlate.ErrDraining) {
		// Not sent, nor is what follows (each is refused the same way
		// when netpoll calls again for it); what was pushed before goes.
		err = nil
	}
	p.in.apply(p)
	p.s.m.batch[batchRequests][onPoller].Inc()
	if err == nil {
		var all bool
		if all, err = p.up.send(); err != nil {
			err = errUpstreamWrite{err}
		} else if !all {
			p.upHanded = true // runTask hands upMu to a goroutine that flushes w
		}
	}
	if err != nil {
		clear(p.up.iov)
		p.up.iov = p.up.iov[:0]
		p.abandon(r, "client", err)
		return
	}
	r.Release()
}

// relayResponsesInline relays, on the poller, the responses that
// upstreamInline found buffered (all whole) and writes them to the client
// without blocking; the caller holds wmu.
func (p *pair) relayResponsesInline(r netpoll.Reader) {
	w := p.client.Writer()
	max := p.s.framing.MaxResponseBytes
	var err error
	for err == nil && r.Len() >= framing.SizeLen {
		var frame []byte
		if frame, err = framing.Next(r, max); err == nil {
			err = p.deliver(frame, w)
		}
	}
	p.s.m.batch[batchResponses][onPoller].Inc()
	if err == nil {
		var all bool
		if all, err = p.cli.send(); err != nil {
			err = errClientWrite{err}
		} else if !all {
			p.clientHanded = true // runTask hands wmu to a goroutine that flushes w
		}
	}
	if err != nil {
		p.out.drop() // not delivered
	}
	if !p.clientHanded { // else finishSend counts the batch once it is flushed
		p.out.apply(p)
	}
	if err != nil {
		clear(p.cli.iov)
		p.cli.iov = p.cli.iov[:0]
		p.failEnding()
		p.abandon(r, "upstream", err)
		return
	}
	// The spans read the response bytes, which Release gives back.
	p.endSpans()
	r.Release()
	// The caller holds wmu: drained means every response is written, but
	// for what a goroutine still flushes (finishSend checks after it).
	if p.draining.Load() && !p.clientHanded && p.table.Drained() {
		go p.close(reasonDrained, nil)
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
		err = errOverBudget // the pair is closed
	}
	p.handBack(from, in)
	if to == toClient {
		if err != nil {
			p.out.drop()
		}
		p.out.apply(p) // under wmu, which owner is
	}
	if err != nil {
		p.closeOnError(side, wrap(err))
	}
	owner.Unlock()
	p.closeIfDrained() // the last responses of a drain may have been these
}

// abandon ends an inline batch that failed. The input left is dropped, or
// netpoll would call the handler again for it; the pair is marked failing
// at once, so nothing more is relayed, and closed from another goroutine,
// since closing a connection from its poller can hang it.
func (p *pair) abandon(r netpoll.Reader, side string, err error) {
	p.failing.Store(true)
	dropInput(r)
	go p.closeOnError(side, err)
}

// writeUp adds a request frame to the batch going upstream.
func (p *pair) writeUp(w netpoll.Writer, frame []byte) error {
	if p.inClient {
		p.up.iov = append(p.up.iov, frame)
		return nil
	}
	_, err := w.WriteBinary(frame)
	return err
}

// writeClient adds a response frame to the batch going to the client.
func (p *pair) writeClient(w netpoll.Writer, frame []byte) error {
	if p.inUpstream {
		p.cli.iov = append(p.cli.iov, frame)
		return nil
	}
	_, err := w.WriteBinary(frame)
	return err
}

// dropInput discards what r holds. A handler that will not relay it must
// still consume it: netpoll calls the handler again while input remains.
func dropInput(r netpoll.Reader) {
	_ = r.Skip(r.Len())
	r.Release()
}
