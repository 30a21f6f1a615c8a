package loop

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudwego/netpoll"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/policy"
	"github.com/kproxy/kproxy/proxy/core"
	"github.com/kproxy/kproxy/relay"
)

// newTestDriver is a Driver with no sockets or listeners, enough for the
// budget and the sweep, over a core with a budget of budget bytes and
// package proxy's default limits.
func newTestDriver(t *testing.T, budget int64) *Driver {
	t.Helper()
	m := core.NewMetrics(prometheus.NewRegistry())
	env := &relay.Env{Table: correlate.Config{MaxInFlight: 8}, Metrics: m.Relay,
		Policies: new(atomic.Pointer[policy.Engine])}
	k := core.New(core.Limits{
		MaxConnections:   10000,
		MaxUnreadBytes:   128 << 20,
		MaxBufferedBytes: int(budget),
		DialTimeout:      5 * time.Second,
		WriteTimeout:     30 * time.Second,
	}, env, zerolog.Nop(), m)
	t.Cleanup(k.Shutdown)
	return New(k)
}

// lenPair opens on d's core (core.Open, the one way to register a
// connection) a pair whose sides are lenConns, without starting its
// relay.
func lenPair(t *testing.T, d *Driver) (p *pair, client, upstream *lenConn) {
	t.Helper()
	client, upstream = &lenConn{}, &lenConn{}
	c := d.k.Open(core.Opening{
		Client: client,
		Port: &core.Port{Upstream: func(context.Context) (string, error) { return "upstream.test:9092", nil },
			DialFailed: func() {}, Unknown: func(*zerolog.Logger, error) {}},
		Reset: func() {},
		Drop:  func() {},
		Dial:  func(context.Context, string) (net.Conn, error) { return upstream, nil },
		Link: func(c *core.Conn, up net.Conn) (relay.Link, core.Transport) {
			p = &pair{d: d, c: c, client: client, upstream: up.(netpoll.Connection)}
			return p, p
		},
		Setup: func(c *core.Conn) { p.sess = c.Sess },
	})
	if c == nil {
		t.Fatal("the core refused the fake pair")
	}
	return p, client, upstream
}

// lenConn is a connection whose reader holds as many bytes as told; all
// the sweep asks of it. Closing it does nothing, or waits for block to
// be closed if set.
type lenConn struct {
	netpoll.Connection
	r     lenReader
	block chan struct{}
}

func (c *lenConn) Reader() netpoll.Reader { return &c.r }

func (c *lenConn) Close() error {
	if c.block != nil {
		<-c.block
	}
	return nil
}

func (c *lenConn) RemoteAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (c *lenConn) LocalAddr() net.Addr  { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2} }

type lenReader struct {
	netpoll.Reader
	n atomic.Int64
}

func (r *lenReader) Len() int { return int(r.n.Load()) }

// Pairs whose charges one sweep refuses close the largest holder once:
// the sweep walks every pair once to find it, and lists it once, however
// many charges it refuses (issue 14, item 5).
func TestBufferBudgetSweepChoosesOneVictim(t *testing.T) {
	d := newTestDriver(t, 1<<20)
	big, bigIn, _ := lenPair(t, d)
	bigIn.r.n.Store(900 << 10)
	if !big.hold(fromClient, &bigIn.r) {
		t.Fatal("the first charge was refused")
	}
	var small []*pair
	for range 3 {
		p, in, _ := lenPair(t, d)
		in.r.n.Store(200 << 10) // each would take the budget past its bound
		p.waitStart()
		small = append(small, p)
	}
	over, _ := d.sweepWaiting(nil)
	if len(over) != 1 || over[0].Conn != big.c {
		names := []string{}
		for _, o := range over {
			n := "a small pair"
			if o.Conn == big.c {
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
	d := newTestDriver(t, 1<<30)
	p, client, _ := lenPair(t, d)
	p.waitStart()
	p.waitEnd()
	for range keepIdleSweeps {
		d.sweepWaiting(nil)
	}
	if _, empty := d.sweepWaiting(nil); !empty {
		t.Fatal("the idle pair is still listed")
	}

	client.r.n.Store(1 << 20) // input arrives; the relay charges what it leaves
	p.hold(fromClient, &client.r)
	if used := d.k.Budget.Used(); used != 1<<20 {
		t.Fatalf("charged %d, want %d", used, 1<<20)
	}
	client.r.n.Store(0) // relayed on the poller
	for range keepIdleSweeps + 1 {
		d.sweepWaiting(nil)
	}
	if used := d.k.Budget.Used(); used != 0 {
		t.Fatalf("a charge of %d bytes stuck to a pair that holds nothing", used)
	}
}

// Walks made at once (the sweep's, a relay's) choose the same victim among
// pairs that hold as much, the oldest, and a closed pair whose charge is
// not yet given back is not passed over for a second victim: its charge is
// given back, and the refused charge tried again. Else two slow readers
// were closed where one made room (issue 14, item 5).
//
// The walk (core's largest) is unexported: it is reached through
// core.Victims.Choose for a refused charge of a pair that holds nothing,
// whose victim is the largest holder the walk found.
func TestBufferBudgetWalksAgreeOnTheVictim(t *testing.T) {
	d := newTestDriver(t, 1<<30)
	var pairs []*pair
	var clients []*lenConn
	for i := range 4 {
		p, in, _ := lenPair(t, d)
		p.c.Opened = time.Unix(int64(100-i), 0) // the last is the oldest
		in.r.n.Store(1 << 20)
		p.hold(fromClient, &in.r)
		pairs = append(pairs, p)
		clients = append(clients, in)
	}
	probe, _, _ := lenPair(t, d) // holds nothing: its victim is the largest holder
	largest := func() (big *core.Conn, freed bool) {
		var v core.Victims // a fresh walk
		o, ok := v.Choose(probe.c, fromClient, 1)
		return o.Conn, !ok // a first Choose chooses none only when its walk freed a charge
	}
	oldest := pairs[len(pairs)-1]
	for range 20 {
		if big, _ := largest(); big != oldest.c {
			t.Fatal("a walk chose another pair than the oldest of those that hold as much")
		}
	}
	// Its close is under way: closed, its sockets being closed, its
	// charge not yet given back.
	block := make(chan struct{})
	clients[len(clients)-1].block = block
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		oldest.c.Close(core.ReasonClientClosed, nil)
	}()
	defer func() { close(block); <-closed }()
	for deadline := time.Now().Add(10 * time.Second); !oldest.c.Closed(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the close never began")
		}
	}
	if !oldest.holds() {
		t.Fatal("the closing pair gave back its charge before its sockets were closed")
	}
	_, freed := largest()
	big, again := largest() // what the walk chooses once the charge is given back
	if !freed || oldest.holds() || again || big == oldest.c {
		t.Fatalf("freed %v, the closing pair still charged %v: a second victim would be closed", freed, oldest.holds())
	}
	if used := d.k.Budget.Used(); used != 3<<20 {
		t.Fatalf("charged %d, want %d", used, 3<<20)
	}
}

// A charge the sweep made while a pair waited does not stay on the budget
// once the pair's input is consumed by a relay that charges nothing (one
// on the poller) and the pair stops waiting: the pair stays on the
// sweep's list until a sweep finds it holds nothing (issue 14, item 5).
func TestBufferBudgetChargeLeavesAnIdlePair(t *testing.T) {
	d := newTestDriver(t, 1<<30)
	p, client, _ := lenPair(t, d)
	p.waitStart()
	p.waitEnd() // it waited once, and no longer

	client.r.n.Store(1 << 20) // a burst arrives as a sweep runs
	for range keepIdleSweeps {
		d.sweepWaiting(nil)
	}
	if used := d.k.Budget.Used(); used != 1<<20 {
		t.Fatalf("charged %d, want %d", used, 1<<20)
	}
	client.r.n.Store(0) // relayed on the poller: nothing is charged there
	for range keepIdleSweeps + 1 {
		d.sweepWaiting(nil)
	}
	if used := d.k.Budget.Used(); used != 0 {
		t.Fatalf("a charge of %d bytes stuck to a pair that holds nothing", used)
	}
	if _, empty := d.sweepWaiting(nil); !empty {
		t.Fatal("the idle pair, holding nothing, is still on the sweep's list")
	}
}
