package proxy

import (
	"context"

	"github.com/cloudwego/netpoll"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/policy"
	"github.com/kproxy/kproxy/tracing"
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
		if r.Len() > p.s.cfg.MaxUnreadBytes {
			p.closeOnError("upstream", errOverflow)
			return nil
		}
		if !p.hold(fromUpstream, r) {
			return nil // closed for the budget
		}
		if err := p.relayResponses(r); err != nil {
			p.closeOnError("upstream", err)
			return nil
		}
		r.Release()
		p.unpin(fromUpstream)
		if p.draining.Load() {
			p.closeIfDrained()
			if p.closed.Load() {
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
// first one to complete), up to maxBatchBytes, and flushes them to the
// client in one write.
func (p *pair) relayResponses(r netpoll.Reader) error {
	max := p.s.framing.MaxResponseBytes
	// Wait for the first whole frame before taking the writer, so a slow
	// partial frame never holds it.
	frame, err := p.nextFrame(r, max)
	if err != nil {
		return err
	}
	batched := len(frame)
	p.pin(fromUpstream, batched) // held until the flush is done, also while it waits for the writer
	p.wmu.Lock()
	defer p.wmu.Unlock()
	w := p.client.Writer()
	for {
		if err = p.deliver(frame, w); err != nil {
			break
		}
		n, whole, berr := framing.Buffered(r, max)
		if !whole || berr != nil || batched >= maxBatchBytes {
			break
		}
		if frame, err = r.Next(n); err != nil {
			break
		}
		batched += len(frame)
		p.pin(fromUpstream, batched)
	}
	p.s.m.batch[batchResponses][inPool].Inc()
	if err == nil {
		if err = p.flush(w, toClient); err != nil {
			err = errClientWrite{err}
		}
	}
	return p.finishBatch(err)
}

// finishBatch ends the spans of a batch written to the client and counts
// its responses and bytes. On error it counts neither, fails the spans
// and closes the pair before wmu is let go, so no one else
// flushes a writer that still points into buffers about to be freed. The
// caller holds wmu.
func (p *pair) finishBatch(err error) error {
	if err != nil {
		p.out.drop() // not delivered: only its in-flight change counts
	}
	p.out.apply(p)
	if err == nil {
		p.endSpans()
		return nil
	}
	p.failEnding()
	p.closeOnError("upstream", err)
	return err
}

// failEnding fails the spans of a batch that was not written. The caller
// holds wmu.
func (p *pair) failEnding() {
	for _, x := range p.ending {
		p.s.tracer.Fail(x.span, "kproxy.connection_closed")
	}
	clear(p.ending)
	p.ending = p.ending[:0]
}

// endSpans ends the spans of the responses just flushed. The caller holds
// wmu.
func (p *pair) endSpans() {
	for _, x := range p.ending {
		p.s.tracer.End(x.span, x.key, x.version, x.frame)
	}
	clear(p.ending)
	p.ending = p.ending[:0]
}

// ending is a traced response written in the current batch.
type ending struct {
	span         *tracing.Span
	key, version int16
	frame        []byte
}

// deliver writes one upstream frame to the client in its request's place,
// with any synthetic responses queued ahead of or behind it.
func (p *pair) deliver(frame []byte, w netpoll.Writer) error {
	// Answers kproxy queued ahead of this response go first; one refused
	// on the poller may not have been written yet.
	if err := p.writeSynthetic(w); err != nil {
		return err
	}
	e, err := p.table.Pop(frame)
	if err != nil {
		return err
	}
	p.out.inFlight--
	if e.Kind != correlate.RawToken {
		framing.SetResponseCorrelationID(frame, e.ClientID)
		if e.Throttle > 0 {
			frame = policy.WithThrottle(frame, e.APIKey, e.APIVersion, e.Throttle)
		}
		if e.Amend != nil {
			frame = e.Amend(frame)
		}
		if e.APIKey == framing.KeyApiVersions {
			frame = policy.ClampVersions(frame, e.APIVersion, p.s.policies.Load().HidesUnknownAPIs())
		}
		a := p.s.m.api(e.APIKey)
		p.out.count(a)
		a.latency.Observe(p.out.stamp().Sub(e.Start).Seconds())
		if e.Span != nil {
			p.ending = append(p.ending, ending{e.Span, e.APIKey, e.APIVersion, frame})
		}
		if e.APIKey == framing.KeyMetadata && p.s.readsTopics() {
			p.s.topics.Learn(frame, e.APIVersion)
		}
	}
	p.out.bytes += int64(len(frame))
	if err := p.writeClient(w, frame); err != nil {
		return errClientWrite{err}
	}
	return p.writeSynthetic(w)
}

// writeSynthetic writes the responses kproxy made itself that are now at
// the head of the table. The caller holds wmu and flushes.
func (p *pair) writeSynthetic(w netpoll.Writer) error {
	for s, ok := p.table.PopSynthetic(); ok; s, ok = p.table.PopSynthetic() {
		p.out.inFlight--
		p.out.count(p.s.m.api(s.APIKey))
		if err := p.writeClient(w, s.Response); err != nil {
			return errClientWrite{err}
		}
		if s.Span != nil {
			p.ending = append(p.ending, ending{s.Span, s.APIKey, s.APIVersion, s.Response})
		}
	}
	return nil
}

// errClientWrite marks a failure to write to the client, so the close is
// blamed on the right side.
type errClientWrite struct{ error }

func (e errClientWrite) Unwrap() error { return e.error }
