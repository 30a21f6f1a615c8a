package relay

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/policy"
	"github.com/kproxy/kproxy/tracing"
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

// RefuseOversize judges the next frame in r from its size and header when
// it is over limit, a rule's max_request_bytes: a refused frame's body is
// dropped as it arrives, never buffered whole, and kproxy answers for the
// broker (for Produce, MESSAGE_TOO_LARGE on every partition it named). It
// reports whether it refused the frame; if not, the frame is still in r.
// It may wait for the frame: only a relay that may wait calls it.
func (s *Session) RefuseOversize(r framing.Source, up *Batch, limit int) (bool, error) {
	prefix, err := r.Peek(framing.SizeLen)
	if err != nil {
		return false, err
	}
	size, err := framing.CheckSize(prefix, s.env.Framing.MaxRequestBytes)
	if err != nil || framing.SizeLen+size <= limit {
		return false, nil // a size error is reported by the normal path
	}
	want := min(framing.SizeLen+size, maxHeaderPeek)
	if r.Len() < want {
		// About to wait for the header: send what is ready first.
		s.CountRequests()
		if err := s.link.FlushUp(up); err != nil {
			return false, err
		}
	}
	head, err := r.Peek(want)
	if err != nil {
		return false, err
	}
	if s.table.Sasl() {
		if raw, err := s.saslToken(head, up, true); raw || err != nil {
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
	if s.clientID != string(h.ClientID) {
		s.clientID = string(h.ClientID)
	}
	v := s.env.Policies.Load().CheckOversize(&policy.Request{Key: h.APIKey, Version: h.APIVersion,
		ClientID: s.clientID, Bytes: framing.SizeLen + size, Topics: s.env.Topics, Conn: &s.conn, Listener: s.env.Listener})
	if v.Outcome != policy.Reject {
		return false, nil
	}
	if s.env.Audit != nil { // the body is dropped unread: no resources to name
		s.env.Audit.BeginRefusal(s.auditConn(h), h.APIKey, h.APIVersion, nil).Refused(v.Rule, v.Code, v.Reason)
	}
	e := correlate.Entry{APIKey: h.APIKey, APIVersion: h.APIVersion, ClientID: h.CorrelationID,
		Start: time.Now(), ReqBytes: framing.SizeLen + size}
	var span *tracing.Span
	if s.peer != nil {
		// From the header alone, while h still points into the buffer:
		// the body is dropped unread.
		body := framing.HeaderOnly(h)
		span = s.env.Tracer.Start(s.peer, &body, s.table.NextID(), e.ReqBytes, e.Start)
		span.Policy(v.Rule, "reject", v.Reason)
	}
	resp, err := s.dropOversize(r, up, h, size, v)
	if err != nil {
		s.env.Tracer.Fail(span, failure(err))
		return false, err
	}
	_ = r.Release()
	s.link.Released()
	s.in.count(s.env.Metrics.api(h.APIKey))
	s.in.bytes += int64(e.ReqBytes)
	s.env.Metrics.OversizeAnswered.Inc()
	withSpan(&e, span)
	return true, s.queueResponse(resp, e, v, up, true)
}

// dropOversize drops the refused frame as it arrives and returns the
// answer to it, built from what little was kept (for Produce, the
// partitions it names; bounded by oversizeKept).
func (s *Session) dropOversize(r framing.Source, up *Batch, h framing.RequestHeader, size int, v policy.Verdict) (kmsg.Response, error) {
	// What was relayed before may still reference the input buffer.
	s.CountRequests()
	if err := s.link.FlushUp(up); err != nil {
		return nil, err
	}
	if err := r.Skip(h.BodyOffset); err != nil {
		return nil, err
	}
	// The body arrives while it is dropped; a driver that reads ahead of
	// the drop watches what it holds meanwhile.
	s.link.WaitStart()
	defer s.link.WaitEnd()
	body := framing.NewStream(r, framing.SizeLen+size-h.BodyOffset)
	if h.APIKey == framing.KeyProduce {
		acks, parts, err := framing.StreamProduce(body, h.APIVersion, oversizeKept)
		if errors.Is(err, framing.ErrTooWide) {
			v.Reason += ", naming more partitions than kproxy keeps to answer"
			return nil, PolicyCloseError{v}
		}
		if err != nil {
			return nil, err
		}
		if acks == 0 || len(parts) == 0 {
			return nil, PolicyCloseError{v} // no answer is expected, or none can name an error
		}
		return policy.ProduceRefusal(h.APIVersion, parts, v.Code), nil
	}
	if err := body.Rest(); err != nil {
		return nil, err
	}
	req := kmsg.RequestForKey(h.APIKey)
	if req == nil {
		return nil, PolicyCloseError{v}
	}
	req.SetVersion(h.APIVersion)
	resp, ok := policy.ErrorResponse(req, v.Code)
	if !ok {
		return nil, PolicyCloseError{v}
	}
	return resp, nil
}
