package proxy

import (
	"errors"
	"time"

	"github.com/cloudwego/netpoll"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/policy"
)

// maxHeaderPeek is how much is read to judge a frame by its header;
// maxHeader covers the longest header (a 32 KiB client id, tags).
const (
	maxHeaderPeek = 4 << 10
	maxHeader     = 64 << 10
)

// oversizeKept bounds what kproxy keeps of a Produce refused by size to
// answer it: about 13,000 partitions of one topic (a topic also costs its
// name). A frame of a few MB can name millions, and an answer naming each
// would cost tens of times the frame; a request naming more is closed
// instead, as a broker closes on a frame it will not read.
const oversizeKept = 512 << 10

// refuseOversize judges the next frame from its size and header when it
// is over a rule's max_request_bytes: a refused frame's body is dropped as
// it arrives, never buffered whole, and kproxy answers for the broker
// (for Produce, MESSAGE_TOO_LARGE on every partition it named).
func (p *pair) refuseOversize(r netpoll.Reader, w netpoll.Writer, limit int) (bool, error) {
	prefix, err := r.Peek(framing.SizeLen)
	if err != nil {
		return false, err
	}
	size, err := framing.CheckSize(prefix, p.s.framing.MaxRequestBytes)
	if err != nil || framing.SizeLen+size <= limit {
		return false, nil // a size error is reported by the normal path
	}
	want := min(framing.SizeLen+size, maxHeaderPeek)
	if r.Len() < want {
		// About to wait for the header: send what is ready first.
		if err := p.flushUp(w); err != nil {
			return false, errUpstreamWrite{err}
		}
	}
	head, err := r.Peek(want)
	if err != nil {
		return false, err
	}
	if p.table.Sasl() {
		if raw, err := p.saslToken(head, r, w); raw || err != nil {
			return false, err // a token is relayed untouched
		}
	}
	h, err := framing.ParseRequestHeader(head)
	if err != nil && want < framing.SizeLen+size {
		// A header longer than the peek (a huge client id): read as much
		// as a header can hold, still far short of the body.
		if head, err = r.Peek(min(framing.SizeLen+size, maxHeader)); err != nil {
			return false, err
		}
		h, err = framing.ParseRequestHeader(head)
	}
	if err != nil || h.HeaderVersion < 0 {
		return false, nil // judged, or refused, on the normal path
	}
	if p.clientID != string(h.ClientID) {
		p.clientID = string(h.ClientID)
	}
	v := p.s.policies.Load().CheckOversize(&policy.Request{Key: h.APIKey, Version: h.APIVersion,
		ClientID: p.clientID, Bytes: framing.SizeLen + size, Topics: p.s.topics, Conn: &p.conn, Listener: p.s.cfg.Listen})
	if v.Outcome != policy.Reject {
		return false, nil
	}
	e := correlate.Entry{APIKey: h.APIKey, APIVersion: h.APIVersion, ClientID: h.CorrelationID,
		Start: time.Now(), ReqBytes: framing.SizeLen + size}
	if p.peer != nil {
		// From the header alone, while h still points into the buffer:
		// the body is dropped unread.
		body := framing.HeaderOnly(h)
		e.Span = p.s.tracer.Start(p.peer, &body, p.table.NextID(), e.ReqBytes, e.Start)
		e.Span.Policy(v.Rule, "reject", v.Reason)
	}
	resp, err := p.dropOversize(r, w, h, size, v)
	if err != nil {
		p.s.tracer.Fail(e.Span, failure(err))
		return false, err
	}
	r.Release()
	p.unpin(fromClient)
	p.in.count(p.s.m.api(h.APIKey))
	p.in.bytes += int64(e.ReqBytes)
	p.s.m.oversizeAnswered.Inc()
	return true, p.queueResponse(resp, e, v, r, w)
}

// dropOversize drops the refused frame as it arrives and returns the
// answer to it, built from what little was kept (for Produce, the
// partitions it names; bounded by oversizeKept).
func (p *pair) dropOversize(r netpoll.Reader, w netpoll.Writer, h framing.RequestHeader, size int, v policy.Verdict) (kmsg.Response, error) {
	// What was relayed before may still reference the input buffer.
	if err := p.flushUp(w); err != nil {
		return nil, errUpstreamWrite{err}
	}
	if err := r.Skip(h.BodyOffset); err != nil {
		return nil, err
	}
	// The body arrives while it is dropped, and netpoll reads ahead of
	// the drop: on the sweep's list, what the pair holds meanwhile is
	// charged to max_buffered_bytes and bounded by max_unread_bytes.
	p.waitStart()
	defer p.waitEnd()
	body := framing.NewStream(r, framing.SizeLen+size-h.BodyOffset)
	if h.APIKey == framing.KeyProduce {
		acks, parts, err := framing.StreamProduce(body, h.APIVersion, oversizeKept)
		if errors.Is(err, framing.ErrTooWide) {
			v.Reason += ", naming more partitions than kproxy keeps to answer"
			return nil, errPolicyClose{v}
		}
		if err != nil {
			return nil, err
		}
		if acks == 0 || len(parts) == 0 {
			return nil, errPolicyClose{v} // no answer is expected, or none can name an error
		}
		return policy.ProduceRefusal(h.APIVersion, parts, v.Code), nil
	}
	if err := body.Rest(); err != nil {
		return nil, err
	}
	req := kmsg.RequestForKey(h.APIKey)
	if req == nil {
		return nil, errPolicyClose{v}
	}
	req.SetVersion(h.APIVersion)
	resp, ok := policy.ErrorResponse(req, v.Code)
	if !ok {
		return nil, errPolicyClose{v}
	}
	return resp, nil
}

// failure is the error type of the span of a request that got no answer
// because of err.
func failure(err error) string {
	var pc errPolicyClose
	switch {
	case errors.As(err, &pc):
		return "kproxy.policy_rejected"
	case errors.Is(err, framing.ErrMalformed):
		return "kproxy.malformed_request"
	}
	return "kproxy.connection_closed"
}
