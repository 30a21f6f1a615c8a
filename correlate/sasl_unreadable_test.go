package correlate

import (
	"testing"

	"github.com/kproxy/kproxy/framing"
)

// In the raw phase of a mechanism with unknown rounds (GSSAPI), a frame
// that reads as a request kproxy cannot parse (DeleteTopics at a version
// newer than kproxy's kmsg, a key newer than it) is neither relayed as a
// token, which the broker would run unjudged, nor taken for a request:
// FrameUnreadable, and the connection is closed. GSSAPI's tokens never
// read so, short frames and tokens of other shapes stay tokens.
func TestSaslUnknownRoundsUnreadableRequest(t *testing.T) {
	newer := framing.MaxVersion(20) + 1
	for _, frame := range [][]byte{
		reqFrame(20, newer, 9, "admin", 2, []byte{2, 7, 's', 'e', 'c', 'r', 'e', 't', 0, 0}),
		reqFrame(framing.MaxKey+1, 0, 9, "admin", 1, nil),
		reqFrame(200, 3, 9, "admin", 1, nil),
	} {
		tb := New(4)
		handshake(t, tb, "GSSAPI", 0)
		tokenRound(t, tb, token(0x60, 0x82, 0x02, 0x7a, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12), token(0x60, 0x01))
		if k := frameKind(t, tb, frame); k != FrameUnreadable {
			t.Errorf("frame %x after GSSAPI tokens: kind %v, want FrameUnreadable", frame[:8], k)
		}
	}
	tb := New(16)
	handshake(t, tb, "GSSAPI", 0)
	for _, tok := range [][]byte{
		token(0x60, 0x82, 0x02, 0x7a, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12), // initial context token
		token(0x05, 0x04, 0x01, 0xff, 0x00, 0x0c, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 1), // RFC 4121 Wrap
		token(0x04, 0x04, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 1), // RFC 4121 MIC
		token(),                    // empty response
		token(0, 3, 0, 1, 0, 0, 0), // too short for a request header
		token([]byte("\x00admin\x00secret-password")...), // PLAIN-like: the "version" is 0x6164
	} {
		tokenRound(t, tb, tok, token(0x60, 0x01))
	}
}

// Only the SCRAM mechanisms Kafka ships are counted as two rounds; any
// other name of the family may take more or fewer.
func TestSaslRoundsScramFamily(t *testing.T) {
	for mech, want := range map[string]int8{
		"SCRAM-SHA-256": 2, "scram-sha-512": 2, "SCRAM-SHA-1": 0, "SCRAM-": 0, "SCRAM-SHA-256-PLUS": 0,
	} {
		if got := SaslRounds(mech); got != want {
			t.Errorf("SaslRounds(%q) = %d, want %d", mech, got, want)
		}
	}
}
