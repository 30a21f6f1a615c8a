package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	"github.com/cloudwego/netpoll"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/policy"
)

// maxBatchBytes ends a batch so that it is flushed: a client sending
// faster than the upstream takes would otherwise keep one batch growing in
// netpoll's output buffer, where neither the relay's own check nor the
// overflow sweep (which watches relays blocked in a flush) sees it.
const maxBatchBytes = 1 << 20

// backpressurePoll is how often a client paused on a full in-flight table
// has its unread input checked against max_unread_bytes.
const backpressurePoll = 100 * time.Millisecond

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
			p.closeOnError("client", errOverflow)
			return nil
		}
		if !p.hold(fromClient, r) {
			return nil // closed for the budget
		}
		if p.mutedUntil != 0 {
			if d := p.muted(time.Now()); d <= 0 {
				p.mutedUntil = 0 // over: batches may go on the poller again
			} else if !nextExempt(r) {
				// Throttled: like a broker, stop reading this client
				// until the delay has passed (heartbeats excepted).
				p.waitStart()
				time.Sleep(min(d, backpressurePoll))
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
	defer p.in.apply(p) // what an error left uncounted
	w := p.upstream.Writer()
	max := p.s.framing.MaxRequestBytes
	batched := 0
	for first := true; ; first = false {
		if !first && (r.Len() < framing.SizeLen || batched >= maxBatchBytes) {
			break
		}
		if limit := p.s.policies.Load().MaxFrame(); limit > 0 {
			refused, err := p.refuseOversize(r, w, limit)
			if errors.Is(err, correlate.ErrDraining) {
				break // not sent; the pair closes once what was sent is answered
			}
			if err != nil {
				return err
			}
			if refused {
				batched = 0 // what was batched before it is flushed and released
				continue
			}
		}
		var frame []byte
		var err error
		if first {
			frame, err = p.nextFrame(r, max)
		} else {
			n, whole, berr := framing.Buffered(r, max)
			if !whole || berr != nil {
				break // a size error is reported on the next call
			}
			frame, err = r.Next(n)
		}
		if err != nil {
			return err
		}
		batched += len(frame)
		p.pin(fromClient, batched) // held until the flush is done
		if err := p.forward(frame, r, w); errors.Is(err, correlate.ErrDraining) {
			break // as above
		} else if err != nil {
			return err
		}
		if p.mutedUntil != 0 && p.muted(time.Now()) > 0 {
			break // the rest waits out the throttle
		}
	}
	p.s.m.batch[batchRequests][inPool].Inc()
	if err := p.flushUp(w); err != nil {
		return errUpstreamWrite{err}
	}
	return nil
}

// flushUp sends the batch upstream, counting its requests first: their
// responses may be counted as soon as it is sent.
func (p *pair) flushUp(w netpoll.Writer) error {
	p.in.apply(p)
	return p.flush(w, toUpstream)
}

// forward writes one request frame upstream, recording it in the table
// unless it expects no response, or answers it in the broker's place when a
// policy refuses it.
func (p *pair) forward(frame []byte, r netpoll.Reader, w netpoll.Writer) error {
	p.in.bytes += int64(len(frame))
	if p.table.Sasl() {
		raw, err := p.saslToken(frame, r, w)
		if err != nil {
			return err
		}
		if raw {
			if _, err := p.push(correlate.Entry{Kind: correlate.RawToken, Start: p.in.stamp()}, r, w); err != nil {
				return err
			}
			return p.writeUp(w, frame)
		}
	}
	h, err := framing.ParseRequestHeader(frame)
	if err != nil {
		return err
	}
	p.in.count(p.s.m.api(h.APIKey))
	e := correlate.Entry{Kind: correlate.Forwarded, APIKey: h.APIKey, APIVersion: h.APIVersion,
		ClientID: h.CorrelationID, Start: p.in.stamp(), ReqBytes: len(frame)}
	body := framing.NewBody(h, frame)
	if p.peer != nil {
		e.Span = p.s.tracer.Start(p.peer, &body, p.table.NextID(), len(frame), e.Start)
	}
	noResponse := false
	if h.BodyOffset > 0 {
		switch h.APIKey {
		case framing.KeyProduce:
			acks, err := framing.ProduceAcks(frame[h.BodyOffset:], h.APIVersion)
			if err != nil {
				p.s.tracer.Fail(e.Span, "kproxy.malformed_request")
				return err
			}
			noResponse = acks == 0
		case framing.KeySaslHandshake:
			if h.APIVersion == 0 {
				e.SaslRounds = correlate.HandshakeRounds(frame[h.BodyOffset:])
			}
		}
	}
	eng := p.s.policies.Load()
	if p.inClient {
		// A batch on the poller keeps the rules it was admitted with
		// (none that throttle); a reload applies from the next batch.
		eng = p.batchRules
	}
	if !eng.Empty() {
		if p.clientID != string(h.ClientID) {
			p.clientID = string(h.ClientID)
		}
		v := eng.Check(&policy.Request{Key: h.APIKey, Version: h.APIVersion, ClientID: p.clientID,
			Bytes: len(frame), Topics: p.s.topics, Conn: &p.conn, Listener: p.s.cfg.Listen}, &body, e.Start)
		switch v.Outcome {
		case policy.Reject:
			e.Span.Policy(v.Rule, "reject", v.Reason)
			if noResponse {
				p.s.tracer.Fail(e.Span, "kproxy.policy_rejected")
				return errPolicyClose{v}
			}
			if part := partial(&body, v); part != nil {
				// Only some partitions are refused: the broker gets the
				// rest, and the refused ones are added to its answer.
				frame = policy.WithoutPartitions(frame, h, part, v.Partitions)
				e.Amend = func(resp []byte) []byte {
					return policy.WithRefusedPartitions(resp, h.APIVersion, v.Partitions, v.Code)
				}
				break
			}
			return p.answer(&body, e, v, r, w)
		case policy.Throttle:
			e.Span.Policy(v.Rule, "throttle", v.Reason)
			e.Throttle = v.Delay
			p.mutedUntil = e.Start.Add(v.Delay).UnixNano()
		}
	}
	if noResponse { // acks=0: no response will come, so no entry
		err := p.writeUp(w, frame)
		p.s.tracer.End(e.Span, h.APIKey, h.APIVersion, nil)
		return err
	}
	id, err := p.push(e, r, w)
	if err != nil {
		p.s.tracer.Fail(e.Span, "kproxy.connection_closed")
		return err
	}
	framing.SetRequestCorrelationID(frame, id)
	return p.writeUp(w, frame)
}

// answer queues kproxy's own error response to a refused request in the
// request's place and writes it at once if nothing is ahead of it.
func (p *pair) answer(body *framing.Body, e correlate.Entry, v policy.Verdict, r netpoll.Reader, w netpoll.Writer) error {
	req, err := body.Request()
	if err != nil || req == nil {
		p.s.tracer.Fail(e.Span, "kproxy.policy_rejected")
		return errPolicyClose{v} // a version kproxy cannot answer in
	}
	return p.queueAnswer(req, e, v, r, w)
}

// queueAnswer puts kproxy's error response to req in the request's place
// and writes it at once if nothing is ahead of it.
func (p *pair) queueAnswer(req kmsg.Request, e correlate.Entry, v policy.Verdict, r netpoll.Reader, w netpoll.Writer) error {
	resp, ok := policy.ErrorResponse(req, v.Code)
	if !ok {
		p.s.tracer.Fail(e.Span, "kproxy.policy_rejected")
		return errPolicyClose{v}
	}
	return p.queueResponse(resp, e, v, r, w)
}

// queueResponse puts resp, kproxy's answer to a request refused by v, in
// the request's place and writes it at once if nothing is ahead of it.
func (p *pair) queueResponse(resp kmsg.Response, e correlate.Entry, v policy.Verdict, r netpoll.Reader, w netpoll.Writer) error {
	e.Kind, e.Response = correlate.Synthetic, policy.EncodeResponse(resp, e.ClientID)
	if _, err := p.push(e, r, w); err != nil {
		p.s.tracer.Fail(e.Span, "kproxy.connection_closed")
		return err
	}
	p.log.Debug().Str("rule", v.Rule).Str("api", framing.Name(e.APIKey)).Int16("error_code", v.Code).Str("reason", v.Reason).Msg("request refused by policy")
	p.in.apply(p) // count the request before its answer
	if p.inClient {
		// The poller must not wait for wmu or the client: a goroutine
		// writes the answer, unless a response ahead of it does first.
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
	err := p.writeSynthetic(cw)
	if err == nil {
		ur := p.upstream.Reader()
		if !p.hand(fromUpstream, cw.MallocLen(), ur) {
			err = errOverBudget // the pair is closed
		} else if err = p.flush(cw, toClient); err != nil {
			err = errClientWrite{err}
		}
		p.handBack(fromUpstream, ur)
	}
	return p.finishBatch(err)
}

// nextExempt reports whether the next buffered request is one a throttle
// never holds back (a heartbeat).
func nextExempt(r netpoll.Reader) bool {
	if r.Len() < 6 {
		return false
	}
	b, err := r.Peek(6)
	return err == nil && policy.Exempt(int16(binary.BigEndian.Uint16(b[4:])))
}

// partial returns the produce request when a verdict refuses only some of
// its partitions, or nil when the whole request is refused.
func partial(body *framing.Body, v policy.Verdict) *kmsg.ProduceRequest {
	if len(v.Partitions) == 0 {
		return nil
	}
	req, _ := body.Request()
	p, ok := req.(*kmsg.ProduceRequest)
	if !ok {
		return nil
	}
	n := 0
	for _, t := range p.Topics {
		n += len(t.Partitions)
	}
	if len(v.Partitions) >= n {
		return nil
	}
	return p
}

// muted returns how long a throttle still holds this client.
func (p *pair) muted(now time.Time) time.Duration {
	return time.Duration(p.mutedUntil - now.UnixNano())
}

// errPolicyClose is a refusal that cannot be answered in-band (acks=0
// produce, or an API version kproxy cannot build a response for): the
// connection is closed, as a broker would.
type errPolicyClose struct{ v policy.Verdict }

func (e errPolicyClose) Error() string {
	return "refused by policy rule " + e.v.Rule + " (" + e.v.Reason + ") and cannot be answered in-band"
}

// push records e, pausing this client while the table is full. What has
// been written upstream so far is flushed first: the responses that make
// room may be waiting on it.
func (p *pair) push(e correlate.Entry, r netpoll.Reader, w netpoll.Writer) (int32, error) {
	id, err := p.table.Push(e)
	if err != correlate.ErrFull {
		if err == nil {
			p.in.inFlight++
		}
		return id, err
	}
	if p.inClient { // clientInline checked for room; never wait on the poller
		return 0, errInlineFull
	}
	p.s.m.backpressure.Inc()
	if err := p.flushUp(w); err != nil {
		return 0, errUpstreamWrite{err}
	}
	for {
		p.waitStart()
		err := p.table.WaitRoom(backpressurePoll)
		p.waitEnd()
		switch err {
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

var (
	errOverflow   = errors.New("unread input over max_unread_bytes")
	errInlineFull = errors.New("in-flight table filled during a batch relayed on the poller")
)

// errUpstreamWrite marks a failure to write to the upstream, so the close
// is blamed on the right side.
type errUpstreamWrite struct{ error }

func (e errUpstreamWrite) Unwrap() error { return e.error }
