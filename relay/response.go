package relay

import (
	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/policy"
)

// Response relays one whole response frame from the upstream: matched to
// the head of the table, given back the client's correlation id (and a
// throttle, refused partitions, clamped versions where the request asked
// for them) and added to out, with kproxy's own answers queued ahead of or
// behind it. The frame is changed in place. The caller holds the client
// writer until it has written out and called Written and EndSpans.
func (s *Session) Response(frame []byte, out *Batch) error {
	// Answers kproxy queued ahead of this response go first; one refused
	// by a relay that could not wait may not have been written yet.
	s.Answers(out)
	e, err := s.table.Pop(frame)
	if err != nil {
		return err
	}
	if e.Kind == correlate.Own { // kproxy's own request: never the client's
		e.Reply <- append([]byte(nil), frame...)
		return nil
	}
	s.out.inFlight--
	if e.Kind != correlate.RawToken {
		framing.SetResponseCorrelationID(frame, e.ClientID)
		if e.Throttle > 0 {
			frame = policy.WithThrottle(frame, e.APIKey, e.APIVersion, e.Throttle)
		}
		if e.Amend != nil {
			frame = e.Amend(frame)
		}
		if e.Audit != nil {
			auditSettle(e, frame)
		}
		if e.APIKey == framing.KeyApiVersions {
			// Cluster mode hides the keys it cannot read, as topic rules do.
			hideUnknown := s.env.Policies.Load().HidesUnknownAPIs() || s.env.Addresses != nil
			frame = policy.ClampVersions(frame, e.APIVersion, hideUnknown, s.env.hidden(), s.env.offered())
		}
		if s.env.Addresses != nil {
			if frame, err = s.env.Addresses.Rewrite(frame, e.APIKey, e.APIVersion); err != nil {
				s.env.Tracer.Fail(spanOf(e), "kproxy.unmapped_broker")
				s.env.Metrics.Failed.Inc()
				return AddressError{err}
			}
		}
		a := s.env.Metrics.api(e.APIKey)
		s.out.count(a)
		s.out.observe(a, s.out.stamp().Sub(e.Start))
		if sp := spanOf(e); sp != nil {
			s.ending = append(s.ending, ending{sp, e.APIKey, e.APIVersion, frame})
		}
		if e.APIKey == framing.KeyMetadata && s.env.readsTopics() {
			s.env.Topics.Learn(frame, e.APIVersion)
		}
		if e.APIKey == framing.KeyFetch && s.lag != nil {
			s.lag.Response(frame, e.APIVersion, s.out.stamp())
		}
	}
	s.out.bytes += int64(len(frame))
	out.Add(frame)
	s.Answers(out)
	return nil
}

// Answers adds the responses kproxy made itself that are now at the head
// of the table to out. The caller holds the client writer.
func (s *Session) Answers(out *Batch) {
	if !s.table.HasSynthetic() {
		return // the common case, kept inlinable into Response
	}
	for a, ok := s.table.PopSynthetic(); ok; a, ok = s.table.PopSynthetic() {
		s.out.inFlight--
		s.out.count(s.env.Metrics.api(a.APIKey))
		out.Add(a.Response)
		if sp := spanOf(a); sp != nil {
			s.ending = append(s.ending, ending{sp, a.APIKey, a.APIVersion, a.Response})
		}
	}
}

// Written counts the responses added since the last call, when delivered
// says the client took them; otherwise only their leaving the table is
// counted. The caller holds the client writer.
func (s *Session) Written(delivered bool) {
	if !delivered {
		s.out.drop()
	}
	s.out.apply(s)
}

// EndSpans ends the spans of the traced responses added since the last
// call, or fails them when the batch was not delivered. The spans read
// the response bytes: call it before the input they point into is
// released. The caller holds the client writer.
func (s *Session) EndSpans(delivered bool) {
	for _, x := range s.ending {
		if delivered {
			s.env.Tracer.End(x.span, x.key, x.version, x.frame)
		} else {
			s.env.Tracer.Fail(x.span, "kproxy.connection_closed")
		}
	}
	clear(s.ending)
	s.ending = s.ending[:0]
}
