package relay

import (
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/policy"
)

// frames is the request frames of reqs, back to back, as a driver finds
// them buffered.
func frames(reqs ...kmsg.Request) []byte {
	var b []byte
	for i, r := range reqs {
		b = append(b, request(r, int32(i+1))...)
	}
	return b
}

// byteSource is a framing.Source over bytes already here.
type byteSource struct{ b []byte }

func bytesSource(b []byte) *byteSource { return &byteSource{b} }
func (s *byteSource) Len() int         { return len(s.b) }
func (s *byteSource) Release() error   { return nil }
func (s *byteSource) Skip(n int) error { _, err := s.Next(n); return err }
func (s *byteSource) Next(n int) ([]byte, error) {
	b, err := s.Peek(n)
	if err == nil {
		s.b = s.b[n:]
	}
	return b, err
}
func (s *byteSource) Peek(n int) ([]byte, error) {
	if n > len(s.b) {
		return nil, errors.New("short")
	}
	return s.b[:n], nil
}

// A batch may run without waiting only when nothing in it could wait: the
// session says so from the frames alone, whatever the driver.
func TestRequestsInlineDecides(t *testing.T) {
	two := frames(kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrMetadataRequest())
	s, _ := newSession(t, 8)
	if !s.RequestsInline(two) {
		t.Fatal("two whole small requests, room for both, no rules: not inline")
	}
	if s.RequestsInline(two[:len(two)-1]) {
		t.Fatal("a partial frame went inline")
	}
	if s.RequestsInline(append(two, make([]byte, InlineMaxBytes)...)) {
		t.Fatal("more than InlineMaxBytes went inline")
	}
	full, _ := newSession(t, 1)
	if full.RequestsInline(two) {
		t.Fatal("two requests went inline with room for one in the table")
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	if s.RequestsInline(frames(hs)) {
		t.Fatal("a SaslHandshake went inline: the frames behind a v0 one may wait for its answer")
	}
	throttling, _ := newSession(t, 8, policy.Rule{Name: "slow", Action: policy.ActionThrottle,
		Limits: policy.Limits{RequestsPerSecond: 1}})
	if throttling.RequestsInline(two) {
		t.Fatal("a rule that can throttle let a batch go inline")
	}
	sized, _ := newSession(t, 8, policy.Rule{Name: "small", Action: policy.ActionReject,
		Limits: policy.Limits{MaxRequestBytes: 20}})
	if sized.RequestsInline(two) {
		t.Fatal("a frame over a rule's max_request_bytes went inline: it must be judged from its header")
	}
	s.SetReauth(time.Now().Add(-time.Second), handshakeReauth)
	if s.RequestsInline(two) {
		t.Fatal("a batch went inline with a re-authentication due")
	}
}

// Responses go inline when whole and small, whatever they are.
func TestResponsesInlineDecides(t *testing.T) {
	s, _ := newSession(t, 8)
	resp := answer(request(kmsg.NewPtrApiVersionsRequest(), 1))
	if !s.ResponsesInline(append(resp, resp...)) {
		t.Fatal("two whole responses: not inline")
	}
	if s.ResponsesInline(resp[:len(resp)-2]) {
		t.Fatal("a partial response went inline")
	}
}

// A throttled client is held until the throttle ends, except for a
// heartbeat, which no throttle holds back.
func TestHeldExemptsHeartbeats(t *testing.T) {
	s, _ := newSession(t, 8)
	r := bytesSource(frames(kmsg.NewPtrMetadataRequest()))
	if d := s.Held(r); d != 0 {
		t.Fatalf("no throttle set, held %v", d)
	}
	s.mutedUntil = time.Now().Add(time.Minute).UnixNano()
	if d := s.Held(r); d <= 0 {
		t.Fatal("a throttled client's Metadata was not held")
	}
	for _, hb := range []kmsg.Request{kmsg.NewPtrHeartbeatRequest(), kmsg.NewPtrConsumerGroupHeartbeatRequest()} {
		if d := s.Held(bytesSource(frames(hb))); d != 0 {
			t.Fatalf("a throttled client's %s was held %v", kmsg.NameForKey(hb.Key()), d)
		}
	}
	s.mutedUntil = time.Now().Add(-time.Second).UnixNano()
	if d := s.Held(r); d != 0 || s.MayMute() {
		t.Fatalf("a throttle that is over still holds (%v) or stays set", d)
	}
}

// Classify names what a Kafka error means, and leaves the transport's to
// the core.
func TestClassifyKinds(t *testing.T) {
	log := zerolog.Nop()
	for _, c := range []struct {
		err   error
		count Counter
		kind  string
	}{
		{&correlate.MismatchError{Got: 1, Want: 2}, CountProtocol, "correlation_mismatch"},
		{correlate.ErrUnexpectedResponse, CountProtocol, "unexpected_response"},
		{SaslUnreadableError{Key: 999}, CountProtocol, "sasl_unreadable_request"},
		{framing.ErrMalformed, CountProtocol, "malformed_client"},
		{ErrOverflow, CountOverflow, ""},
		{PolicyCloseError{policy.Verdict{Rule: "r"}}, CountNone, ""},
	} {
		f, ok := Classify("client", c.err, &log)
		if !ok || f.Count != c.count || f.Kind != c.kind {
			t.Errorf("%v: %+v %v, want count %d kind %q", c.err, f, ok, c.count, c.kind)
		}
	}
	if f, _ := Classify("client", PolicyCloseError{policy.Verdict{Rule: "r"}}, &log); f.Rule != "r" {
		t.Errorf("a policy close names rule %q, want r", f.Rule)
	}
	if _, ok := Classify("client", errors.New("socket"), &log); ok {
		t.Error("a transport error was classified as the session's")
	}
}
