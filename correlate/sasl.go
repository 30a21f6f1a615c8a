package correlate

import (
	"encoding/binary"
	"strings"
	"time"

	"github.com/kproxy/kproxy/framing"
)

// After a successful SaslHandshake v0 the client and broker exchange raw
// SASL tokens framed as `int32 size | token`, with no Kafka header and no
// correlation id, until authentication completes. saslState tracks that
// phase so those frames are relayed untouched and matched by position.
//
// kproxy must never call raw a frame the broker reads as a request: that
// frame would pass no rule. The broker decides from answers kproxy has not
// seen yet when a client pipelines (whether the handshake succeeded, when
// the last token completed the exchange), so a client frame behind an
// unanswered SaslHandshake v0, or behind an unanswered token of a
// mechanism with a known number of rounds, waits for that answer. A
// client may send nothing there anyway: in the v0 flow it sends a token
// and reads the broker's before it sends anything else.
type saslState struct {
	raw        bool
	rounds     int8 // token round trips left; 0 while raw means "unknown"
	handshakes int  // SaslHandshake v0 requests in the table
	tokens     int  // RawToken entries in the table
}

// on reports whether client frames need Frame's lock: a handshake is
// unanswered or the raw phase is on.
func (s *saslState) on() bool { return s.raw || s.handshakes > 0 }

// FrameKind is what Frame makes of a client frame.
type FrameKind uint8

const (
	// FrameRequest: a Kafka request, relayed with its header parsed and
	// every rule applied.
	FrameRequest FrameKind = iota
	// FrameToken: a raw SASL token, relayed untouched.
	FrameToken
	// FrameWait: not known until an answer the broker still owes
	// arrives; hold the frame (and stop reading) until WaitAnswered.
	FrameWait
	// FrameUnreadable: in the raw phase of a mechanism with unknown
	// rounds, a frame that reads as a Kafka request header kproxy cannot
	// parse (a key or version its kmsg does not know). The broker may run
	// it; kproxy cannot judge it, and must not relay it as a token: close
	// the connection.
	FrameUnreadable
)

// SaslRounds returns how many token round trips a mechanism takes in the
// v0 flow, or 0 when it varies (GSSAPI) or the mechanism is not one
// Kafka ships. Counting more rounds than a mechanism takes would relay its
// first request as a token, so only the mechanisms known to take them
// are counted: a custom "SCRAM-something" may take any number.
func SaslRounds(mechanism string) int8 {
	switch strings.ToUpper(mechanism) {
	case "PLAIN", "OAUTHBEARER":
		return 1
	case "SCRAM-SHA-256", "SCRAM-SHA-512":
		return 2
	}
	return 0
}

func (s *saslState) handshakeAnswered(frame []byte, rounds int8) {
	s.handshakes--
	// v0 response: size, correlation id, then error_code int16.
	if len(frame) < 10 || binary.BigEndian.Uint16(frame[8:]) != 0 {
		return
	}
	s.raw, s.rounds = true, rounds
}

func (s *saslState) tokenAnswered() {
	s.tokens--
	if s.rounds > 0 {
		if s.rounds--; s.rounds == 0 {
			s.raw = false
		}
	}
}

// mustWait reports whether the next client frame depends on an answer
// still owed: the handshake's (raw or not), or a counted token's (another
// token or the first request). Tokens of a mechanism with unknown rounds
// are not waited for: GSSAPI's last token gets no answer at all.
func (s *saslState) mustWait() bool {
	return s.handshakes > 0 || s.raw && s.rounds > 0 && s.tokens > 0
}

// Frame says what a client frame is. The caller relays FrameRequest and
// FrameToken frames as such, holds a FrameWait frame until WaitAnswered
// returns, then asks again, and closes the connection on FrameUnreadable.
// When the number of rounds is unknown, the raw phase ends at the first
// client frame that parses as a known Kafka request: the client only sends
// requests once authentication has completed. A frame that reads as a
// request header kproxy cannot parse is FrameUnreadable (see
// readsAsRequest). Tokens still unanswered then never will be (GSSAPI's last
// one): they leave the table, and retired says how many. An answer that
// comes for one after all meets a request's entry and fails the pair, so
// a disagreement with the broker closes the connection rather than
// letting a request through unjudged.
func (t *Table) Frame(frame []byte) (kind FrameKind, retired int) {
	if !t.saslOn.Load() {
		return FrameRequest, 0 // the common case, without the lock
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := &t.sasl
	defer func() { t.saslOn.Store(s.on()) }()
	switch {
	case s.mustWait():
		return FrameWait, 0
	case !s.raw:
		return FrameRequest, 0
	case s.rounds == 0:
		if h, err := framing.ParseRequestHeader(frame); err == nil && h.HeaderVersion >= 0 {
			s.raw = false
			return FrameRequest, t.retireTokens()
		}
		if readsAsRequest(frame) {
			return FrameUnreadable, 0
		}
	}
	return FrameToken, 0
}

// readsAsRequest reports whether a frame kproxy could not parse as a
// request may still be one to the broker: it is long enough for a request
// header (key, version, correlation id) and its key and version are both
// below 256, as every Kafka API key and version is (kproxy knows keys up
// to framing.MaxKey; a newer broker may know more, or newer versions).
// No GSSAPI token looks like that: the first one is an ASN.1 application
// tag (0x60, RFC 2743 3.1, which also frames RFC 1964's per-message
// tokens), and RFC 4121 per-message tokens start with their TOK_ID, 0x04
// 0x04 (MIC) or 0x05 0x04 (Wrap); all start above 0x00. A token of a
// mechanism kproxy does not know that starts with a zero byte, and has
// another in third place, is refused too: kproxy cannot tell it from a
// request.
func readsAsRequest(frame []byte) bool {
	return len(frame) >= 12 && frame[4] == 0 && frame[6] == 0 // size, key, version, correlation id
}

// Sasl reports whether client frames must go through Frame: a SaslHandshake
// v0 awaits its answer, or the raw phase is on. Read without the lock.
func (t *Table) Sasl() bool { return t.saslOn.Load() }

// retireTokens drops the RawToken entries at the tail of the table, the
// tokens sent since the raw phase began. The caller holds mu and is the
// pusher; the popper's fast path, which may be reading the head entry,
// is fenced out while entries leave from the tail.
func (t *Table) retireTokens() int {
	n := 0
	t.fenced(func() {
		for tail := t.tail.Load(); tail != t.head.Load(); tail-- {
			i := (tail - 1) % uint64(len(t.ring))
			if t.ring[i].Kind != RawToken {
				break
			}
			t.ring[i] = Entry{}
			t.tail.Store(tail - 1)
			t.sasl.tokens--
			n++
		}
	})
	if n > 0 {
		t.signal()
	}
	return n
}

// WaitAnswered blocks until a frame Frame held can be judged (nil), the
// table is closed (ErrClosed), or d has passed (ErrAwaitingAnswer), so the
// caller can check its own bounds meanwhile.
func (t *Table) WaitAnswered(d time.Duration) error {
	return t.wait(d, ErrAwaitingAnswer, func() bool { return t.sasl.mustWait() })
}

// HandshakeRounds reads the mechanism from a SaslHandshake request body and
// returns its SaslRounds.
func HandshakeRounds(body []byte) int8 {
	if len(body) < 2 {
		return 0
	}
	n := int(int16(binary.BigEndian.Uint16(body)))
	if n < 0 || len(body) < 2+n {
		return 0
	}
	return SaslRounds(string(body[2 : 2+n]))
}
