package sasl

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/policy"
	"github.com/kproxy/kproxy/relay"
)

// originSession is a session of a connection kproxy logged in as
// principal, with origination's hidden APIs.
func originSession(t *testing.T, principal string) (*relay.Session, *ownLink) {
	t.Helper()
	var rules atomic.Pointer[policy.Engine]
	env := &relay.Env{Framing: framing.Defaults(), Table: correlate.Config{MaxInFlight: 8},
		Metrics: relay.NewMetrics(prometheus.NewRegistry()), Topics: framing.NewTopicIDs(), Policies: &rules,
		Listener: "127.0.0.1:9092", MaxUnread: 1 << 20}
	env.Originate(origination{})
	l := &ownLink{}
	s := relay.New(env, l, zerolog.Nop(), nil)
	l.sess = s
	s.Arm(relay.Login{Principal: principal})
	return s, l
}

// sendOne relays req through s and reports whether it was forwarded, and
// the error code of kproxy's answer when it was not.
func sendOne(t *testing.T, s *relay.Session, l *ownLink, req kmsg.Request) (forwarded bool, code int16) {
	t.Helper()
	var up relay.Batch
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("sasl-test")).AppendRequest(nil, req, 9)
	if err := s.Request(frame, &up, true); err != nil {
		t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	if len(up) > 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.out) == 0 {
		t.Fatalf("%s v%d: neither forwarded nor answered", kmsg.NameForKey(req.Key()), req.GetVersion())
	}
	a := l.out[len(l.out)-1]
	resp, err := framing.DecodeResponse(a, req.Key(), req.GetVersion())
	if err != nil {
		t.Fatalf("%s v%d answer: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return false, framing.FirstError(resp)
}

// Every API origination hides is refused at every version, never relayed,
// with the broker's code; and every kmsg API that handles SASL or
// delegation tokens is among them, so an API kmsg adds later is caught
// here rather than reaching the broker as kproxy.
func TestHiddenAPIsAreRefused(t *testing.T) {
	hidden := map[int16]bool{}
	for _, k := range HiddenAPIs() {
		hidden[k] = true
	}
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		name := kmsg.NameForKey(k)
		if (strings.Contains(name, "DelegationToken") || strings.HasPrefix(name, "SASL")) && !hidden[k] {
			t.Errorf("%s (key %d) handles credentials but is not hidden under origination", name, k)
		}
	}
	for k := range hidden {
		proto := kmsg.RequestForKey(k)
		for v := int16(0); v <= proto.MaxVersion(); v++ {
			req := kmsg.RequestForKey(k)
			req.SetVersion(v)
			s, l := originSession(t, "kproxy")
			forwarded, code := sendOne(t, s, l, req)
			if forwarded {
				t.Errorf("%s v%d was relayed under origination", kmsg.NameForKey(k), v)
				continue
			}
			want := kerr.DelegationTokenRequestNotAllowed.Code
			if k == framing.KeySaslHandshake || k == framing.KeySaslAuthenticate {
				want = kerr.IllegalSaslState.Code
			}
			if code != want {
				t.Errorf("%s v%d answered %d, want %d", kmsg.NameForKey(k), v, code, want)
			}
		}
	}
}

// AlterUserScramCredentials on kproxy's own principal is refused, on
// another user relayed.
func TestScramCredentialsOfOwnPrincipalRefused(t *testing.T) {
	alter := func(user string, del bool) kmsg.Request {
		r := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		if del {
			d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
			d.Name, d.Mechanism = user, 1
			r.Deletions = append(r.Deletions, d)
		} else {
			u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
			u.Name, u.Mechanism, u.Iterations = user, 1, 4096
			u.Salt, u.SaltedPassword = []byte("salt"), []byte("pw")
			r.Upsertions = append(r.Upsertions, u)
		}
		return r
	}
	for _, del := range []bool{false, true} {
		s, l := originSession(t, "kproxy")
		if forwarded, code := sendOne(t, s, l, alter("kproxy", del)); forwarded || code != kerr.ClusterAuthorizationFailed.Code {
			t.Errorf("deletion %v of kproxy's own credentials: forwarded %v, code %d", del, forwarded, code)
		}
		s, l = originSession(t, "kproxy")
		if forwarded, _ := sendOne(t, s, l, alter("alice", del)); !forwarded {
			t.Errorf("deletion %v of another user's credentials was refused", del)
		}
		// An opaque OAUTHBEARER token names no principal kproxy can
		// read: it cannot tell whose credentials these are.
		s, l = originSession(t, "")
		if forwarded, code := sendOne(t, s, l, alter("alice", del)); forwarded || code != kerr.ClusterAuthorizationFailed.Code {
			t.Errorf("deletion %v with kproxy's principal unknown: forwarded %v, code %d", del, forwarded, code)
		}
	}
}
