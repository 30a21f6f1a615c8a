package correlate

import (
	"encoding/binary"
	"testing"
)

// handshake pushes a SaslHandshake v0 request for mechanism and pops the
// broker's answer with errCode, as the two relay directions would.
func handshake(t *testing.T, tb *Table, mechanism string, errCode int16) {
	t.Helper()
	rounds := HandshakeRounds(handshakeV0(mechanism))
	id, err := tb.Push(Entry{Kind: Forwarded, APIKey: 17, APIVersion: 0, ClientID: 1, SaslRounds: rounds})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Pop(handshakeV0Response(id, errCode, "PLAIN", "SCRAM-SHA-256", "GSSAPI")); err != nil {
		t.Fatal(err)
	}
}

// tokenRound relays one raw token and its answer, checking the client frame
// is seen as raw first.
func tokenRound(t *testing.T, tb *Table, clientToken, brokerToken []byte) {
	t.Helper()
	if !tb.Raw(clientToken) {
		t.Fatalf("token %x not seen as raw", clientToken)
	}
	if _, err := tb.Push(Entry{Kind: RawToken}); err != nil {
		t.Fatal(err)
	}
	e, err := tb.Pop(brokerToken)
	if err != nil || e.Kind != RawToken {
		t.Fatalf("token answer: %+v, %v", e, err)
	}
}

// TestSaslPlainV0 checks the v0 flow with one known round: raw from the
// handshake answer to the end of the round, even for a token that happens to
// look like a request, then framed again.
func TestSaslPlainV0(t *testing.T) {
	tb := New(4)
	plain := token([]byte("\x00alice\x00secret")...)
	if tb.Raw(plain) {
		t.Fatal("raw before any handshake")
	}
	handshake(t, tb, "PLAIN", 0)
	if !tb.Raw(metadataRequest(1)) {
		t.Fatal("a token shaped like a request ended a known-length exchange early")
	}
	tokenRound(t, tb, plain, token())
	if tb.Raw(metadataRequest(2)) {
		t.Fatal("still raw after PLAIN's only round")
	}
	// Framed traffic is matched by id again.
	id, _ := tb.Push(Entry{ClientID: 2, APIKey: 3, APIVersion: 1})
	if e, err := tb.Pop(respFrame(id, 0, 0, 0, 0)); err != nil || e.ClientID != 2 {
		t.Fatalf("after auth: %+v, %v", e, err)
	}
}

// TestSaslScramV0 checks SCRAM's two rounds.
func TestSaslScramV0(t *testing.T) {
	tb := New(4)
	handshake(t, tb, "SCRAM-SHA-512", 0)
	tokenRound(t, tb, token([]byte("n,,n=alice,r=abc")...), token([]byte("r=abcdef,s=salt,i=4096")...))
	if !tb.Raw(token([]byte("c=biws,r=abcdef,p=proof")...)) {
		t.Fatal("SCRAM left raw mode after one round")
	}
	tokenRound(t, tb, token([]byte("c=biws,r=abcdef,p=proof")...), token([]byte("v=verifier")...))
	if tb.Raw(metadataRequest(3)) {
		t.Fatal("still raw after SCRAM's two rounds")
	}
}

// TestSaslUnknownMechanismV0 checks a mechanism with a varying number of
// rounds (GSSAPI) stays raw until a client frame parses as a known request
// while no token awaits its answer.
func TestSaslUnknownMechanismV0(t *testing.T) {
	tb := New(4)
	handshake(t, tb, "GSSAPI", 0)
	gss := token(0x60, 0x82, 0x02, 0x7a, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02)
	for i := 0; i < 3; i++ {
		if !tb.Raw(gss) {
			t.Fatalf("round %d: GSSAPI token not raw", i)
		}
		if _, err := tb.Push(Entry{Kind: RawToken}); err != nil {
			t.Fatal(err)
		}
		if !tb.Raw(metadataRequest(4)) {
			t.Fatal("request-shaped frame ended raw mode while a token was pending")
		}
		if _, err := tb.Pop(token(0x60, 0x01)); err != nil {
			t.Fatal(err)
		}
	}
	if !tb.Raw(token(1, 2, 3)) {
		t.Fatal("a short token ended raw mode")
	}
	if tb.Raw(metadataRequest(5)) {
		t.Fatal("a known request with nothing pending did not end raw mode")
	}
	if tb.Raw(gss) {
		t.Fatal("raw mode came back after it ended")
	}
}

// TestSaslFailedHandshake checks an error answer (UNSUPPORTED_SASL_MECHANISM)
// leaves the connection framed: the client will not send raw tokens.
func TestSaslFailedHandshake(t *testing.T) {
	tb := New(2)
	handshake(t, tb, "PLAIN", 33)
	if tb.Raw(token([]byte("\x00u\x00p")...)) {
		t.Fatal("raw after a failed handshake")
	}
}

// TestSaslHandshakeV1 checks v1, which is followed by framed
// SaslAuthenticate requests, never enters raw mode.
func TestSaslHandshakeV1(t *testing.T) {
	tb := New(2)
	id, _ := tb.Push(Entry{APIKey: 17, APIVersion: 1, SaslRounds: 1})
	if _, err := tb.Pop(handshakeV0Response(id, 0, "PLAIN")); err != nil {
		t.Fatal(err)
	}
	if tb.Raw(token([]byte("\x00u\x00p")...)) {
		t.Fatal("raw after SaslHandshake v1")
	}
}

// TestSaslShortHandshakeResponse checks an answer too short to hold an
// error code does not switch to raw mode.
func TestSaslShortHandshakeResponse(t *testing.T) {
	tb := New(2)
	id, _ := tb.Push(Entry{APIKey: 17, APIVersion: 0, SaslRounds: 1})
	if _, err := tb.Pop(respFrame(id, 0)); err != nil {
		t.Fatal(err)
	}
	if tb.Raw(token(1)) {
		t.Fatal("raw after a handshake answer with no error code")
	}
}

// TestHandshakeRounds reads the mechanism from real kmsg request bodies and
// refuses bodies whose length lies.
func TestHandshakeRounds(t *testing.T) {
	for mech, want := range map[string]int8{
		"PLAIN": 1, "plain": 1, "OAUTHBEARER": 1, "SCRAM-SHA-256": 2, "SCRAM-SHA-512": 2,
		"GSSAPI": 0, "": 0, "PLAINX": 0,
	} {
		if got := HandshakeRounds(handshakeV0(mech)); got != want {
			t.Errorf("HandshakeRounds(%q) = %d, want %d", mech, got, want)
		}
		if got := SaslRounds(mech); got != want {
			t.Errorf("SaslRounds(%q) = %d, want %d", mech, got, want)
		}
	}
	long := binary.BigEndian.AppendUint16(nil, 6)
	for _, body := range [][]byte{nil, {0}, {0xff, 0xff}, append(long, "PLAIN"...)} {
		if got := HandshakeRounds(body); got != 0 {
			t.Errorf("HandshakeRounds(%x) = %d, want 0", body, got)
		}
	}
	if got := HandshakeRounds(append(handshakeV0("PLAIN"), 0xff)); got != 1 {
		t.Errorf("trailing byte changed the answer: %d", got)
	}
}
