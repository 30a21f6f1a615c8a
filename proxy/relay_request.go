package proxy

import (
	"context"
	"errors"
	"time"

	"github.com/cloudwego/netpoll"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
)

// backpressurePoll is how often a client paused on a full in-flight table
// has its unread input checked against max_unread_bytes.
const backpressurePoll = 100 * time.Millisecond

// onClient relays every whole request frame the client has sent, then
// flushes them upstream in one write. netpoll calls it again while unread
// bytes remain.
func (p *pair) onClient(_ context.Context, c netpoll.Connection) error {
	defer p.recoverPanic("client")
	r := c.Reader()
	for {
		if p.draining.Load() {
			// Send nothing new; the response side closes the pair when
			// the table empties, or Drain does at its deadline.
			<-p.done
			return nil
		}
		if r.Len() > p.s.cfg.MaxUnreadBytes {
			p.closeOnError("client", errOverflow)
			return nil
		}
		if err := p.relayRequests(r); err != nil {
			p.closeOnError("client", err)
			return nil
		}
		r.Release()
		if !p.linger(c) {
			return nil
		}
	}
}

// relayRequests forwards every whole request frame buffered (waiting for
// the first one to complete), then flushes them upstream in one write.
func (p *pair) relayRequests(r netpoll.Reader) error {
	w := p.upstream.Writer()
	max := p.s.framing.MaxRequestBytes
	frame, err := framing.Next(r, max)
	for err == nil {
		if err = p.forward(frame, r, w); err != nil {
			return err
		}
		n, whole, berr := framing.Buffered(r, max)
		if !whole || berr != nil {
			break // a size error is reported on the next call
		}
		frame, err = r.Next(n)
	}
	if err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return errUpstreamWrite{err}
	}
	return nil
}

// forward writes one request frame upstream, recording it in the table
// unless it expects no response.
func (p *pair) forward(frame []byte, r netpoll.Reader, w netpoll.Writer) error {
	p.bytesIn.Add(int64(len(frame)))
	p.s.m.bytesIn.Add(float64(len(frame)))
	if p.table.Raw(frame) {
		if _, err := p.push(correlate.Entry{Kind: correlate.RawToken, Start: time.Now()}, r, w); err != nil {
			return err
		}
		_, err := w.WriteBinary(frame)
		return err
	}
	h, err := framing.ParseRequestHeader(frame)
	if err != nil {
		return err
	}
	p.requests.Add(1)
	p.s.m.api(h.APIKey).requests.Inc()
	e := correlate.Entry{Kind: correlate.Forwarded, APIKey: h.APIKey, APIVersion: h.APIVersion,
		ClientID: h.CorrelationID, Start: time.Now(), ReqBytes: len(frame)}
	if p.peer != nil {
		body := framing.NewBody(h, frame)
		e.Span = p.s.tracer.Start(p.peer, &body, p.table.NextID(), len(frame), e.Start)
	}
	if h.BodyOffset > 0 {
		switch h.APIKey {
		case framing.KeyProduce:
			acks, err := framing.ProduceAcks(frame[h.BodyOffset:], h.APIVersion)
			if err != nil {
				p.s.tracer.Fail(e.Span, "kproxy.malformed_request")
				return err
			}
			if acks == 0 { // no response will come: no entry
				_, err := w.WriteBinary(frame)
				p.s.tracer.End(e.Span, h.APIKey, h.APIVersion, nil)
				return err
			}
		case framing.KeySaslHandshake:
			if h.APIVersion == 0 {
				e.SaslRounds = correlate.HandshakeRounds(frame[h.BodyOffset:])
			}
		}
	}
	id, err := p.push(e, r, w)
	if err != nil {
		p.s.tracer.Fail(e.Span, "kproxy.connection_closed")
		return err
	}
	framing.SetRequestCorrelationID(frame, id)
	_, err = w.WriteBinary(frame)
	return err
}

// push records e, pausing this client while the table is full. What has
// been written upstream so far is flushed first: the responses that make
// room may be waiting on it.
func (p *pair) push(e correlate.Entry, r netpoll.Reader, w netpoll.Writer) (int32, error) {
	id, err := p.table.Push(e)
	if err != correlate.ErrFull {
		if err == nil {
			p.s.m.inFlight.Inc()
		}
		return id, err
	}
	p.s.m.backpressure.Inc()
	if err := w.Flush(); err != nil {
		return 0, err
	}
	for {
		switch err := p.table.WaitRoom(backpressurePoll); err {
		case nil:
			return p.push(e, r, w)
		case correlate.ErrFull:
			if r.Len() > p.s.cfg.MaxUnreadBytes {
				return 0, errOverflow
			}
		default:
			return 0, err
		}
	}
}

var errOverflow = errors.New("unread input over max_unread_bytes")

// errUpstreamWrite marks a failure to write to the upstream, so the close
// is blamed on the right side.
type errUpstreamWrite struct{ error }

func (e errUpstreamWrite) Unwrap() error { return e.error }
