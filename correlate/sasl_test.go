package correlate

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

// frameKind is what Frame makes of a frame, failing the test on a retire.
func frameKind(t *testing.T, tb *Table, frame []byte) FrameKind {
	t.Helper()
	k, retired := tb.Frame(frame)
	if retired != 0 {
		t.Fatalf("%d tokens retired by %x", retired, frame)
	}
	return k
}

// raw reports whether Frame calls a frame a token.
func raw(t *testing.T, tb *Table, frame []byte) bool {
	t.Helper()
	return frameKind(t, tb, frame) == FrameToken
}

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
	if !raw(t, tb, clientToken) {
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
	if raw(t, tb, plain) {
		t.Fatal("raw before any handshake")
	}
	handshake(t, tb, "PLAIN", 0)
	if !raw(t, tb, metadataRequest(1)) {
		t.Fatal("a token shaped like a request ended a known-length exchange early")
	}
	tokenRound(t, tb, plain, token())
	if raw(t, tb, metadataRequest(2)) {
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
	if !raw(t, tb, token([]byte("c=biws,r=abcdef,p=proof")...)) {
		t.Fatal("SCRAM left raw mode after one round")
	}
	tokenRound(t, tb, token([]byte("c=biws,r=abcdef,p=proof")...), token([]byte("v=verifier")...))
	if raw(t, tb, metadataRequest(3)) {
		t.Fatal("still raw after SCRAM's two rounds")
	}
}

// TestSaslUnknownMechanismV0 checks a mechanism with a varying number of
// rounds (GSSAPI) stays raw until a client frame parses as a known request,
// and is never held: GSSAPI's last token gets no answer in the v0 flow.
func TestSaslUnknownMechanismV0(t *testing.T) {
	tb := New(4)
	handshake(t, tb, "GSSAPI", 0)
	gss := token(0x60, 0x82, 0x02, 0x7a, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02)
	for i := 0; i < 3; i++ {
		tokenRound(t, tb, gss, token(0x60, 0x01))
	}
	if !raw(t, tb, token(1, 2, 3)) {
		t.Fatal("a short token ended raw mode")
	}
	if raw(t, tb, metadataRequest(5)) {
		t.Fatal("a known request with nothing pending did not end raw mode")
	}
	if raw(t, tb, gss) {
		t.Fatal("raw mode came back after it ended")
	}
}

// TestSaslGssapiLastTokenUnanswered checks the end of a GSSAPI v0 exchange:
// the broker answers the client's last token with nothing, and the client
// sends its first request. That request is judged as a request (not held
// for an answer that never comes, not relayed raw), the unanswered token
// leaves the table, and responses are matched by id again.
func TestSaslGssapiLastTokenUnanswered(t *testing.T) {
	tb := New(4)
	handshake(t, tb, "GSSAPI", 0)
	tokenRound(t, tb, token(0x60, 0x82), token(0x60, 0x01))
	if !raw(t, tb, token(0x05, 0x04, 0x01)) {
		t.Fatal("last token not raw")
	}
	if _, err := tb.Push(Entry{Kind: RawToken}); err != nil {
		t.Fatal(err)
	}
	k, retired := tb.Frame(metadataRequest(6))
	if k != FrameRequest || retired != 1 {
		t.Fatalf("request behind the unanswered last token: %v, %d retired; want a request, 1 retired", k, retired)
	}
	if tb.Len() != 0 || tb.Sasl() {
		t.Fatalf("after the raw phase: %d entries, sasl %v", tb.Len(), tb.Sasl())
	}
	id, _ := tb.Push(Entry{ClientID: 6, APIKey: 3, APIVersion: 1})
	if e, err := tb.Pop(respFrame(id, 0, 0, 0, 0)); err != nil || e.ClientID != 6 {
		t.Fatalf("after auth: %+v, %v", e, err)
	}
}

// TestSaslGssapiLateAnswerFails checks a token answer arriving after kproxy
// ended the raw phase (a client that sent a request-shaped frame behind an
// unanswered token) fails the table rather than being taken for a
// response: kproxy and the broker disagree, and the pair must close.
func TestSaslGssapiLateAnswerFails(t *testing.T) {
	tb := New(4)
	handshake(t, tb, "GSSAPI", 0)
	if !raw(t, tb, token(0x60, 0x82)) {
		t.Fatal("first token not raw")
	}
	tb.Push(Entry{Kind: RawToken})
	if k, retired := tb.Frame(metadataRequest(7)); k != FrameRequest || retired != 1 {
		t.Fatalf("request-shaped frame behind a token: %v, %d retired", k, retired)
	}
	id, _ := tb.Push(Entry{ClientID: 7, APIKey: 3, APIVersion: 1})
	if _, err := tb.Pop(token(0x60, 0x01, 0x02, 0x03, 0x04)); err == nil {
		t.Fatalf("a late token answer was taken for the response to upstream id %d", id)
	}
}

// TestSaslPipelinedBehindToken checks the frames a client sends behind a
// counted token in the same write: none is raw (they would reach the broker
// unjudged once PLAIN completes); each waits until the token is answered,
// and is then a request.
func TestSaslPipelinedBehindToken(t *testing.T) {
	tb := New(8)
	handshake(t, tb, "PLAIN", 0)
	if !raw(t, tb, token([]byte("\x00u\x00p")...)) {
		t.Fatal("PLAIN token not raw")
	}
	tb.Push(Entry{Kind: RawToken})
	for i := 0; i < 3; i++ {
		if k := frameKind(t, tb, metadataRequest(int32(10+i))); k != FrameWait {
			t.Fatalf("frame %d behind an unanswered PLAIN token: %v, want FrameWait", i, k)
		}
	}
	if err := tb.WaitAnswered(0); !errors.Is(err, ErrAwaitingAnswer) {
		t.Fatalf("WaitAnswered with the token unanswered: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- tb.WaitAnswered(10 * time.Second) }()
	if _, err := tb.Pop(token()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("WaitAnswered after the answer: %v", err)
	}
	if k := frameKind(t, tb, metadataRequest(10)); k != FrameRequest {
		t.Fatalf("after PLAIN's answer: %v, want FrameRequest", k)
	}
}

// TestSaslScramSecondTokenWaits checks SCRAM's second token, sent before
// the first is answered, waits too, and is raw once it is.
func TestSaslScramSecondTokenWaits(t *testing.T) {
	tb := New(8)
	handshake(t, tb, "SCRAM-SHA-256", 0)
	first, second := token([]byte("n,,n=u,r=a")...), token([]byte("c=biws,r=ab,p=x")...)
	if !raw(t, tb, first) {
		t.Fatal("first token not raw")
	}
	tb.Push(Entry{Kind: RawToken})
	if k := frameKind(t, tb, second); k != FrameWait {
		t.Fatalf("second token behind the first: %v, want FrameWait", k)
	}
	tb.Pop(token([]byte("r=ab,s=s,i=4096")...))
	if !raw(t, tb, second) {
		t.Fatal("second token not raw once the first was answered")
	}
}

// TestSaslPipelinedBehindHandshake checks frames behind an unanswered
// SaslHandshake v0 wait for it: whether they are tokens or requests depends
// on its error code.
func TestSaslPipelinedBehindHandshake(t *testing.T) {
	for _, tc := range []struct {
		code int16
		want FrameKind
	}{{0, FrameToken}, {33, FrameRequest}} {
		tb := New(4)
		id, _ := tb.Push(Entry{Kind: Forwarded, APIKey: 17, APIVersion: 0, ClientID: 1, SaslRounds: 1})
		if !tb.Sasl() {
			t.Fatal("an unanswered handshake v0 does not send frames to Frame")
		}
		if k := frameKind(t, tb, metadataRequest(2)); k != FrameWait {
			t.Fatalf("frame behind an unanswered handshake: %v, want FrameWait", k)
		}
		tb.Pop(handshakeV0Response(id, tc.code, "PLAIN"))
		if k := frameKind(t, tb, metadataRequest(2)); k != tc.want {
			t.Fatalf("after handshake error %d: %v, want %v", tc.code, k, tc.want)
		}
	}
}

// TestSaslRefusedHandshakeIsNoBarrier checks a SaslHandshake v0 kproxy
// answers itself (refused by a rule) holds nothing back: the broker never
// sees it.
func TestSaslRefusedHandshakeIsNoBarrier(t *testing.T) {
	tb := New(4)
	tb.Push(Entry{Kind: Synthetic, APIKey: 17, APIVersion: 0})
	if tb.Sasl() || frameKind(t, tb, metadataRequest(1)) != FrameRequest {
		t.Fatal("a synthetic handshake made frames wait")
	}
}

// TestSaslFailedHandshake checks an error answer (UNSUPPORTED_SASL_MECHANISM)
// leaves the connection framed: the client will not send raw tokens.
func TestSaslFailedHandshake(t *testing.T) {
	tb := New(2)
	handshake(t, tb, "PLAIN", 33)
	if raw(t, tb, token([]byte("\x00u\x00p")...)) {
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
	if raw(t, tb, token([]byte("\x00u\x00p")...)) {
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
	if raw(t, tb, token(1)) {
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
