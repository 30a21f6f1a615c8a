package relay

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/policy"
	"github.com/kproxy/kproxy/tracing"
)

// Request relays one whole request frame from the client: it is added to
// up with kproxy's correlation id, recorded in the table unless it expects
// no response, or answered in the broker's place when a policy refuses it.
// With mayWait false it never blocks: a frame that would have to wait
// fails with ErrWouldWait, and answers kproxy makes are written by the
// driver from another goroutine. correlate.ErrDraining means the frame was
// not sent, nor may any after it be.
func (s *Session) Request(frame []byte, up *Batch, mayWait bool) error {
	if mayWait && s.reauth != nil && s.ReauthDue() {
		// A relay that may not wait leaves it to the next that may: a
		// driver sends batches to one once ReauthDue says so.
		if err := s.reauthenticate(up); err != nil {
			return err
		}
	}
	s.in.bytes += int64(len(frame))
	if s.table.Sasl() {
		raw, err := s.saslToken(frame, up, mayWait)
		if err != nil {
			return err
		}
		if raw {
			if _, err := s.push(correlate.Entry{Kind: correlate.RawToken, Start: s.in.stamp()}, up, mayWait); err != nil {
				return err
			}
			up.Add(frame)
			return nil
		}
	}
	h, err := framing.ParseRequestHeader(frame)
	if err != nil {
		return err
	}
	if h.APIKey == framing.KeyFetch && s.reauthTook > 0 {
		s.shortenFetch(frame, h)
	}
	s.in.count(s.env.Metrics.api(h.APIKey))
	e := correlate.Entry{Kind: correlate.Forwarded, APIKey: h.APIKey, APIVersion: h.APIVersion,
		ClientID: h.CorrelationID, Start: s.in.stamp(), ReqBytes: len(frame)}
	body := framing.NewBody(h, frame)
	var fetch framing.FetchRequestInfo // a Fetch's walk, when lag did it
	fetchWalked := false
	if s.lag != nil {
		fetch, fetchWalked = s.lagRequest(frame, h, &body)
	}
	var span *tracing.Span
	if s.peer != nil {
		span = s.env.Tracer.Start(s.peer, &body, s.table.NextID(), len(frame), e.Start)
	}
	noResponse := false
	acks, acksRead := int16(0), false
	if h.BodyOffset > 0 {
		switch h.APIKey {
		case framing.KeyProduce:
			var err error
			if acks, err = framing.ProduceAcks(frame[h.BodyOffset:], h.APIVersion); err != nil {
				s.env.Tracer.Fail(span, "kproxy.malformed_request")
				return err
			}
			noResponse, acksRead = acks == 0, true
		case framing.KeySaslHandshake:
			if h.APIVersion == 0 {
				e.SaslRounds = correlate.HandshakeRounds(frame[h.BodyOffset:])
			}
		}
	}
	ap := s.auditBegin(h, &body) // nil unless the audit log is on and takes this API
	if s.env.Originating {
		if v, refused := s.originRefusal(h.APIKey, &body); refused {
			ap.Refused(v.Rule, v.Code, v.Reason)
			withSpan(&e, span)
			return s.refuse(&body, e, v, up, mayWait)
		}
	}
	if s.env.Addresses != nil && !s.env.Addresses.Passes(h.APIKey) {
		ap.Refused(clusterRefusal.Rule, clusterRefusal.Code, clusterRefusal.Reason)
		withSpan(&e, span)
		return s.refuse(&body, e, clusterRefusal, up, mayWait)
	}
	eng := s.env.Policies.Load()
	if !mayWait && s.rules != nil {
		// A batch that may not wait keeps the rules it was admitted with
		// (none that throttle); a reload applies from the next batch.
		eng = s.rules
	}
	if !eng.Empty() {
		if s.clientID != string(h.ClientID) {
			s.clientID = string(h.ClientID)
		}
		pr := policy.Request{Key: h.APIKey, Version: h.APIVersion, ClientID: s.clientID,
			Bytes: len(frame), Topics: s.env.Topics, Conn: &s.conn, Listener: s.env.Listener, Acks: acks, AcksRead: acksRead}
		if h.APIKey == framing.KeyProduce && eng.ReadsRecords() {
			s.env.Tracer.InitRecordBudget(&s.budget) // never on the poller: RequestsInline
			pr.Records = &s.budget
		}
		v := eng.Check(&pr, &body, e.Start)
		if len(v.Observed) > 0 {
			s.observed(span, h.APIKey, v)
		}
		switch v.Outcome {
		case policy.Reject:
			span.Policy(v.Rule, "reject", v.Reason)
			if noResponse {
				s.auditRefusal(ap, h, &body, v, true)
				s.env.Tracer.Fail(span, "kproxy.policy_rejected")
				return PolicyCloseError{v}
			}
			if len(v.Refusals) > 0 && !v.Whole {
				ap = s.auditRefusal(ap, h, &body, v, false)
				// A content rule refused some items: the broker gets the
				// rest, and the refused ones are added to its answer.
				req, _ := body.Request()
				frame = policy.WithoutRefused(frame, h, req, v.Refusals)
				items := v.Refusals
				e.Amend = func(resp []byte) []byte {
					return policy.WithRefusals(resp, h.APIKey, h.APIVersion, items)
				}
				if v.Delay > 0 { // a later rule throttles what goes on
					span.Policy(v.Rule, "throttle", "the rest of a partly refused request, throttled")
					e.Throttle = v.Delay
					s.mutedUntil = e.Start.Add(v.Delay).UnixNano()
				}
				break
			}
			if part := partial(&body, v); part != nil {
				// Only some partitions are refused: the broker gets the
				// rest, and the refused ones are added to its answer.
				ap = s.auditRefusal(ap, h, &body, v, false)
				frame = policy.WithoutPartitions(frame, h, part, v.Partitions)
				drop, code := v.Partitions, v.Code // not v: a closure over v would move it to the heap
				e.Amend = func(resp []byte) []byte {
					return policy.WithRefusedPartitions(resp, h.APIVersion, drop, code)
				}
				break
			}
			withSpan(&e, span)
			s.auditRefusal(ap, h, &body, v, true)
			return s.answer(&body, e, v, up, mayWait)
		case policy.Throttle:
			span.Policy(v.Rule, "throttle", v.Reason)
			e.Throttle = v.Delay
			s.mutedUntil = e.Start.Add(v.Delay).UnixNano()
		case policy.Close:
			s.auditRefusal(ap, h, &body, v, true)
			span.Policy(v.Rule, "close", v.Reason)
			s.env.Tracer.Fail(span, "kproxy.policy_rejected")
			return PolicyCloseError{v}
		}
	}
	if s.env.Clients != nil && clientTelemetryAPI(h.APIKey) {
		withSpan(&e, span)
		return s.answerTelemetry(&body, string(h.ClientID), e, up, mayWait)
	}
	if span != nil && h.APIKey == framing.KeyProduce {
		// Sampled: records that carry no trace context get the span's
		// (tracing.propagation.inject), after the rules judged them as
		// sent. Such produces never reach here on the poller
		// (Tracer.InflatesRecords).
		frame = s.env.Tracer.Inject(span, frame, h)
	}
	if noResponse { // acks=0: no response will come, so no entry
		up.Add(frame)
		s.env.Tracer.End(span, h.APIKey, h.APIVersion, nil)
		return nil
	}
	withSpan(&e, span)
	withAudit(&e, ap)
	id, err := s.push(e, up, mayWait)
	if err != nil {
		ap.Unknown() // not sent, or sent and never to be answered here
		s.env.Tracer.Fail(span, "kproxy.connection_closed")
		return err
	}
	framing.SetRequestCorrelationID(frame, id)
	if h.APIKey == framing.KeyFetch && s.env.Rack != nil {
		s.addFetch(frame, h, fetch, fetchWalked, up)
		return nil
	}
	up.Add(frame)
	return nil
}

// CountRequests adds the requests relayed since the last call to the
// counters. A driver calls it before it writes them upstream: their
// responses may be counted as soon as they are sent.
func (s *Session) CountRequests() { s.in.apply(s) }

// answer queues kproxy's own error response to a refused request in the
// request's place.
func (s *Session) answer(body *framing.Body, e correlate.Entry, v policy.Verdict, up *Batch, mayWait bool) error {
	req, err := body.Request()
	if err != nil || req == nil {
		s.env.Tracer.Fail(spanOf(e), "kproxy.policy_rejected")
		return PolicyCloseError{v} // a version kproxy cannot answer in
	}
	resp, ok := policy.RefusalResponse(req, v)
	if !ok {
		s.env.Tracer.Fail(spanOf(e), "kproxy.policy_rejected")
		return PolicyCloseError{v}
	}
	return s.queueResponse(resp, e, v, up, mayWait)
}

// queueResponse puts resp, kproxy's answer to a request refused by v, in
// the request's place, and has the driver write it at once if nothing is
// ahead of it.
func (s *Session) queueResponse(resp kmsg.Response, e correlate.Entry, v policy.Verdict, up *Batch, mayWait bool) error {
	s.log.Debug().Str("rule", v.Rule).Str("api", framing.Name(e.APIKey)).Int16("error_code", v.Code).Str("reason", v.Reason).Msg("request refused by policy")
	return s.queueAnswer(resp, e, up, mayWait)
}

// queueAnswer puts resp, kproxy's own answer, in the request's place, and
// has the driver write it at once if nothing is ahead of it.
func (s *Session) queueAnswer(resp kmsg.Response, e correlate.Entry, up *Batch, mayWait bool) error {
	e.Kind, e.Response = correlate.Synthetic, policy.EncodeResponse(resp, e.ClientID)
	if _, err := s.push(e, up, mayWait); err != nil {
		s.env.Tracer.Fail(spanOf(e), "kproxy.connection_closed")
		return err
	}
	s.in.apply(s) // count the request before its answer
	return s.link.Answer(!mayWait)
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

// push records e, pausing this client while the table is full. What has
// been batched for the upstream so far is flushed first: the responses
// that make room may be waiting on it.
func (s *Session) push(e correlate.Entry, up *Batch, mayWait bool) (int32, error) {
	id, err := s.table.Push(e)
	if err != correlate.ErrFull {
		if err == nil {
			s.in.inFlight++
		}
		return id, err
	}
	if !mayWait { // the driver checked for room; never wait here
		return 0, ErrWouldWait
	}
	s.env.Metrics.Backpressure.Inc()
	s.CountRequests()
	if err := s.link.FlushUp(up); err != nil {
		return 0, err
	}
	for {
		s.link.WaitStart()
		err := s.table.WaitRoom(backpressurePoll)
		s.link.WaitEnd()
		switch err {
		case nil:
			return s.push(e, up, mayWait)
		case correlate.ErrFull:
			if s.link.Unread() > s.env.MaxUnread {
				return 0, ErrOverflow
			}
			if s.link.Gone() {
				return 0, ErrClientGone
			}
		default:
			return 0, err
		}
	}
}

// observed reports the violations log-only content rules saw in a
// request: a span event each, and a log line when the rule's bound on
// lines allows.
func (s *Session) observed(span *tracing.Span, key int16, v policy.Verdict) {
	for _, o := range v.Observed {
		span.Policy(o.Rule, "log", o.Message)
	}
	if v.Report {
		o := v.Observed[0]
		s.log.Warn().Str("rule", o.Rule).Str("condition", o.Condition).Str("api", framing.Name(key)).
			Str("client_id", s.clientID).Int("violations", len(v.Observed)).Str("reason", o.Message).
			Msg("request breaks a log-only rule (relayed unchanged)")
	}
}
