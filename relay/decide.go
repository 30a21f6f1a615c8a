package relay

import (
	"encoding/binary"
	"time"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/policy"
)

// The questions a driver asks before it moves bytes. A driver knows its
// transport (whether a writer is free, whether it may block); whether a
// batch of Kafka frames may be relayed without ever waiting, or how long
// a client must be held back, is the session's to say.

// InlineMaxBytes bounds the input a batch relayed without waiting may
// hold: such a batch runs where nothing else may wait for it (netpoll's
// poller serves every connection), so no one batch may keep it long.
const InlineMaxBytes = 64 << 10

// ThrottlePoll is how often a driver holding a throttled client back
// looks at it again: for having closed, and for a heartbeat, which no
// throttle holds back.
const ThrottlePoll = 100 * time.Millisecond

// RequestsInline reports whether the request frames in buf, everything
// the client has sent and kproxy not yet relayed, may be relayed without
// waiting (Request with mayWait false): all whole and valid, within
// InlineMaxBytes, room for each in the table, no rule that could
// throttle, none a size rule must judge from its header, no SASL v0
// exchange (frames may wait for the broker's answer) or
// re-authentication due, no PushTelemetry kproxy answers, and no Produce
// whose records the tracer or a rule may inflate (a decompression bomb
// must not stall the poller). When it says yes it pins the rules it
// judged by for that batch (PinRules).
func (s *Session) RequestsInline(buf []byte) bool {
	if s.MayMute() || s.Sasl() || s.ReauthDue() {
		return false
	}
	eng := s.env.Policies.Load()
	if eng.MayThrottle() {
		return false // a throttle pauses the client, which may not wait here
	}
	k, largest, keys, ok := scanFrames(buf, s.env.Framing.MaxRequestBytes, true)
	if !ok || keys.handshake || !s.Room(k) {
		return false // a SaslHandshake v0 would hold the frames behind it
	}
	if keys.produce && (s.env.Tracer.InflatesRecords() || eng.ReadsRecords()) {
		return false // records may be inflated: by the tracer, or to judge a rule
	}
	if keys.push && s.env.Clients != nil {
		return false // kproxy inflates and decodes pushed metrics itself
	}
	if limit := eng.MaxFrame(); limit > 0 && largest > limit {
		return false // refused frames are judged from their header where they may wait
	}
	s.PinRules(eng)
	return true
}

// ResponsesInline reports whether the response frames in buf may be
// relayed without waiting: all whole and valid, within InlineMaxBytes,
// and no Fetch whose records the tracer may inflate.
func (s *Session) ResponsesInline(buf []byte) bool {
	if s.env.Tracer.InflatesFetches() {
		return false // a traced Fetch's batches may be decompressed for its links
	}
	_, _, _, ok := scanFrames(buf, s.env.Framing.MaxResponseBytes, false)
	return ok
}

// Held reports how long the client's next request must still wait for a
// throttle, 0 when it may go now: none is set, it is over, a
// re-authentication is due (a throttle never holds the request path past
// the session's point), or the next buffered request (peeked from r,
// never waited for) is a heartbeat, which no throttle holds back. It
// serves the request path only. The clock is read only when a throttle
// was set.
func (s *Session) Held(r framing.Source) time.Duration {
	if !s.MayMute() {
		return 0
	}
	if s.reauth != nil && s.ReauthDue() {
		// A throttle never mutes past the re-authentication point: the
		// next request re-authenticates first, before the broker's
		// session ends.
		return 0
	}
	d := s.Muted(time.Now())
	if d > 0 && nextExempt(r) {
		return 0
	}
	return d
}

// nextExempt reports whether the next buffered request is one a throttle
// never holds back (a heartbeat).
func nextExempt(r framing.Source) bool {
	if r.Len() < 6 {
		return false
	}
	b, err := r.Peek(6)
	return err == nil && policy.Exempt(int16(binary.BigEndian.Uint16(b[4:])))
}

// frameKeys is what scanFrames saw of a batch's request keys: a
// SaslHandshake (the frames behind it may have to wait for its answer)
// a Produce (its records may be inflated for trace links) and a
// PushTelemetry (kproxy inflates it when it answers client telemetry).
type frameKeys struct{ handshake, produce, push bool }

// scanFrames counts the frames in buf, with the largest frame's size,
// and reports whether they are all whole, valid (within limit) and
// together no more than InlineMaxBytes. For requests, keys says which of
// the API keys above are among them, read from where a request keeps its
// key; a response has its correlation id there.
func scanFrames(b []byte, limit int, requests bool) (k, largest int, keys frameKeys, ok bool) {
	if len(b) < framing.SizeLen || len(b) > InlineMaxBytes {
		return 0, 0, frameKeys{}, false
	}
	for len(b) >= framing.SizeLen {
		size := int32(binary.BigEndian.Uint32(b))
		if size < 0 || int(size) > limit || int(size) > len(b)-framing.SizeLen {
			return 0, 0, frameKeys{}, false // partial or over the limit: reported where the relay may wait
		}
		if requests && size >= 2 {
			switch int16(binary.BigEndian.Uint16(b[4:])) {
			case framing.KeySaslHandshake:
				keys.handshake = true
			case framing.KeyProduce:
				keys.produce = true
			case framing.KeyPushTelemetry:
				keys.push = true
			}
		}
		b = b[framing.SizeLen+int(size):]
		k++
		largest = max(largest, framing.SizeLen+int(size))
	}
	return k, largest, keys, len(b) == 0
}

// FirstHead is how much of a connection's first frame FirstRequest reads:
// the size and the API key and version.
const FirstHead = 8

// minRequest is the shortest request frame body: API key, version,
// correlation id and a client id's length.
const minRequest = 10

// FirstRequest checks the head of a connection's first frame before
// kproxy logs in at the broker for it (sasl.upstream): a size within
// max_request_bytes that holds a request header, and an API key. A port
// scanner's probe, an HTTP health check or a TLS ClientHello fails it,
// and costs no login; what fails it would be closed as oversize or
// malformed anyway.
func FirstRequest(head []byte, maxRequest int) error {
	size, err := framing.CheckSize(head, maxRequest)
	if err != nil {
		return err
	}
	if size < minRequest || int16(binary.BigEndian.Uint16(head[4:])) < 0 {
		return framing.ErrMalformed
	}
	return nil
}
