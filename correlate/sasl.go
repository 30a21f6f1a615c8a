package correlate

import (
	"encoding/binary"
	"strings"

	"github.com/kproxy/kproxy/framing"
)

// After a successful SaslHandshake v0 the client and broker exchange raw
// SASL tokens framed as `int32 size | token`, with no Kafka header and no
// correlation id, until authentication completes. saslState tracks that
// phase so those frames are relayed untouched and matched by position.
type saslState struct {
	raw     bool
	rounds  int8 // token round trips left; 0 while raw means "unknown"
	pending int  // RawToken entries in the table
}

// SaslRounds returns how many token round trips a mechanism takes in the
// v0 flow, or 0 when it varies (GSSAPI and unknown mechanisms).
func SaslRounds(mechanism string) int8 {
	switch m := strings.ToUpper(mechanism); {
	case m == "PLAIN", m == "OAUTHBEARER":
		return 1
	case strings.HasPrefix(m, "SCRAM-"):
		return 2
	}
	return 0
}

func (s *saslState) handshakeAnswered(frame []byte, rounds int8) {
	// v0 response: size, correlation id, then error_code int16.
	if len(frame) < 10 || binary.BigEndian.Uint16(frame[8:]) != 0 {
		return
	}
	s.raw, s.rounds = true, rounds
}

func (s *saslState) tokenAnswered() {
	if s.rounds > 0 {
		if s.rounds--; s.rounds == 0 {
			s.raw = false
		}
	}
}

// Raw reports whether a client frame is a raw SASL token. When the number
// of rounds is unknown, the raw phase ends at the first client frame that
// parses as a known Kafka request while no token is awaiting its answer:
// the client only sends requests once authentication has completed.
func (t *Table) Raw(frame []byte) bool {
	if !t.raw.Load() {
		return false // the common case, without the lock
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := &t.sasl
	defer func() { t.raw.Store(s.raw) }()
	if !s.raw {
		return false
	}
	if s.rounds == 0 && s.pending == 0 {
		if h, err := framing.ParseRequestHeader(frame); err == nil && h.HeaderVersion >= 0 {
			s.raw = false
			return false
		}
	}
	return true
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
