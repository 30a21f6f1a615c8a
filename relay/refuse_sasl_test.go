package relay

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// TestRefuseSaslEveryVersion: while kproxy originates SASL, a client's
// SaslHandshake and SaslAuthenticate, at every version, are answered
// ILLEGAL_SASL_STATE in the client's correlation id and never forwarded;
// a SaslHandshake v0 does not put the connection in the raw token phase,
// so the client's next request is judged as a request.
func TestRefuseSaslEveryVersion(t *testing.T) {
	var reqs []kmsg.Request
	for v := int16(0); v <= kmsg.NewPtrSASLHandshakeRequest().MaxVersion(); v++ {
		r := kmsg.NewPtrSASLHandshakeRequest()
		r.Version, r.Mechanism = v, "PLAIN"
		reqs = append(reqs, r)
	}
	for v := int16(0); v <= kmsg.NewPtrSASLAuthenticateRequest().MaxVersion(); v++ {
		r := kmsg.NewPtrSASLAuthenticateRequest()
		r.Version, r.SASLAuthBytes = v, []byte("\x00mallory\x00pw")
		reqs = append(reqs, r)
	}
	for i, req := range reqs {
		for _, mayWait := range []bool{true, false} {
			s, l := newSession(t, 8)
			s.env.Originating = true
			var up Batch
			id := int32(100 + i)
			if err := s.Request(request(req, id), &up, mayWait); err != nil {
				t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
			}
			if len(up) != 0 {
				t.Fatalf("%s v%d was forwarded", kmsg.NameForKey(req.Key()), req.GetVersion())
			}
			if len(l.out) != 1 {
				t.Fatalf("%s v%d: %d answers written", kmsg.NameForKey(req.Key()), req.GetVersion(), len(l.out))
			}
			a := l.out[0]
			if got := corr(a, false); got != id {
				t.Fatalf("%s v%d answered with id %d, want %d", kmsg.NameForKey(req.Key()), req.GetVersion(), got, id)
			}
			resp, err := framing.DecodeResponse(a, req.Key(), req.GetVersion())
			if err != nil {
				t.Fatalf("%s v%d answer: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
			}
			if code := framing.FirstError(resp); code != errIllegalSaslState {
				t.Fatalf("%s v%d answered error %d, want ILLEGAL_SASL_STATE", kmsg.NameForKey(req.Key()), req.GetVersion(), code)
			}
			if s.Sasl() {
				t.Fatalf("%s v%d put the connection in the SASL raw phase", kmsg.NameForKey(req.Key()), req.GetVersion())
			}
			// The next frame is a request, forwarded as one.
			if err := s.Request(request(kmsg.NewPtrMetadataRequest(), 7), &up, mayWait); err != nil || len(up) != 1 {
				t.Fatalf("after %s v%d: a Metadata request was not forwarded (%v)", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
			}
		}
	}
}
