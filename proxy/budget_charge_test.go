package proxy

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/relay"
)

// lenServer is a Server with no sockets, enough for the budget and the
// sweep, with a budget of max bytes.
func lenServer(max int64) *Server {
	s := &Server{cfg: Defaults(), m: NewMetrics(prometheus.NewRegistry()), pairs: map[*pair]struct{}{},
		waitKick: make(chan struct{}, 1)}
	s.budget.max = max
	s.env = &relay.Env{Table: correlate.Config{MaxInFlight: 8}, Metrics: s.m.relay, Policies: &s.policies}
	return s
}

// lenPair adds to s a pair whose sides are lenConns.
func lenPair(s *Server) (p *pair, client, upstream *lenConn) {
	client, upstream = &lenConn{}, &lenConn{}
	p = &pair{s: s, client: client, upstream: upstream, done: make(chan struct{})}
	p.sess = relay.New(s.env, p, zerolog.Nop(), nil)
	s.pairs[p] = struct{}{}
	return p, client, upstream
}

// Pairs whose charges one sweep refuses close the largest holder once:
// the sweep walks every pair once to find it, and lists it once, however
// many charges it refuses (issue 14, item 5).
func TestBufferBudgetSweepChoosesOneVictim(t *testing.T) {
	s := lenServer(1 << 20)
	big, bigIn, _ := lenPair(s)
	bigIn.r.n.Store(900 << 10)
	if !big.hold(fromClient, &bigIn.r) {
		t.Fatal("the first charge was refused")
	}
	var small []*pair
	for range 3 {
		p, in, _ := lenPair(s)
		in.r.n.Store(200 << 10) // each would take the budget past its bound
		p.waitStart()
		small = append(small, p)
	}
	over, _ := s.sweepWaiting(nil)
	if len(over) != 1 || over[0].p != big {
		names := []string{}
		for _, o := range over {
			n := "a small pair"
			if o.p == big {
				n = "the largest"
			}
			names = append(names, n)
		}
		t.Fatalf("one sweep chose %v to close, want the largest holder once", names)
	}
	for _, p := range small {
		if p.holds() {
			t.Fatal("a refused charge was kept")
		}
	}
}

// A charge a relay makes on a pair the sweep no longer lists puts the
// pair back on the list: else, once what it charged is relayed on the
// poller (which charges nothing), the charge would stick to an idle pair
// (issue 14, item 5).
func TestBufferBudgetRelayChargeListsThePair(t *testing.T) {
	s := lenServer(1 << 30)
	p, client, _ := lenPair(s)
	p.waitStart()
	p.waitEnd()
	for range keepIdleSweeps {
		s.sweepWaiting(nil)
	}
	if _, empty := s.sweepWaiting(nil); !empty {
		t.Fatal("the idle pair is still listed")
	}

	client.r.n.Store(1 << 20) // input arrives; the relay charges what it leaves
	p.hold(fromClient, &client.r)
	if used := s.budget.used.Load(); used != 1<<20 {
		t.Fatalf("charged %d, want %d", used, 1<<20)
	}
	client.r.n.Store(0) // relayed on the poller
	for range keepIdleSweeps + 1 {
		s.sweepWaiting(nil)
	}
	if used := s.budget.used.Load(); used != 0 {
		t.Fatalf("a charge of %d bytes stuck to a pair that holds nothing", used)
	}
}

// Walks made at once (the sweep's, a relay's) choose the same victim among
// pairs that hold as much, the oldest, and a closed pair whose charge is
// not yet given back is not passed over for a second victim: its charge is
// given back, and the refused charge tried again. Else two slow readers
// were closed where one made room (issue 14, item 5).
func TestBufferBudgetWalksAgreeOnTheVictim(t *testing.T) {
	s := lenServer(1 << 30)
	var pairs []*pair
	for i := range 4 {
		p, in, _ := lenPair(s)
		p.opened = time.Unix(int64(100-i), 0) // the last is the oldest
		in.r.n.Store(1 << 20)
		p.hold(fromClient, &in.r)
		pairs = append(pairs, p)
	}
	oldest := pairs[len(pairs)-1]
	for range 20 {
		if big, _, _ := s.largest(); big != oldest {
			t.Fatal("a walk chose another pair than the oldest of those that hold as much")
		}
	}
	oldest.closed.Store(true) // its close is under way
	big, _, freed := s.largest()
	if !freed || oldest.holds() || big == oldest {
		t.Fatalf("freed %v, the closing pair still charged %v: a second victim would be closed", freed, oldest.holds())
	}
	if used := s.budget.used.Load(); used != 3<<20 {
		t.Fatalf("charged %d, want %d", used, 3<<20)
	}
}
