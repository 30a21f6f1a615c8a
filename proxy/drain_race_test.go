package proxy

import (
	"context"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kproxy/kproxy/proxy/loop"
	"github.com/twmb/franz-go/pkg/kfake"
)

// countingBroker answers every request at once and counts the requests it
// read whole, over all its connections; wg is done when the conns
// connections it expects have ended.
type countingBroker struct {
	ln   net.Listener
	took atomic.Int64
	wg   sync.WaitGroup
}

func startCountingBroker(t *testing.T, conns int) *countingBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &countingBroker{ln: ln}
	t.Cleanup(func() { ln.Close() })
	b.wg.Add(conns)
	go func() {
		for range conns {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer b.wg.Done()
				defer c.Close()
				for {
					f, err := readFrame(c)
					if err != nil {
						return
					}
					b.took.Add(1)
					echoResponse(c, f, []byte{0, 0, 0, 0, 0, 0}) // ApiVersions v0: no error, no keys
				}
			}()
		}
	}()
	return b
}

// A drain that races new requests must never close a connection after a
// request reached the broker and before its response reached the client:
// a producer would retry it and apply it twice. Clients send one request
// at a time, so their tables are often empty when Drain looks; every round
// checks that the broker read exactly as many requests as the clients got
// responses (requests kproxy did not send are safe to retry).
func TestDrainRacingRequestsLosesNoResponse(t *testing.T) {
	const clients = 8
	deadline := time.Now().Add(8 * time.Second)
	for round := 0; round < 300 && time.Now().Before(deadline); round++ {
		b := startCountingBroker(t, clients)
		env := startProxy(t, b.ln.Addr().String())
		conns := make([]net.Conn, clients)
		for k := range conns {
			conns[k] = dialRaw(t, env.addr)
		}
		raceDrain(t, round, env, b, conns, func(n int32) ([]byte, bool) { return apiVersionsV0(n), true })
	}
}

// raceDrain has each of conns send requests one at a time (request n is
// req(n); fromBroker says whether the broker answers it, rather than
// kproxy) and drains env's kproxy while they do. Once every connection
// has ended it checks that the broker read exactly as many requests as
// the clients got answers from it, each for the request it answers.
func raceDrain(t *testing.T, round int, env *testEnv, b *countingBroker, conns []net.Conn, req func(n int32) (frame []byte, fromBroker bool)) {
	t.Helper()
	var got atomic.Int64
	var started, ended sync.WaitGroup
	started.Add(len(conns))
	ended.Add(len(conns))
	for _, c := range conns {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		go func() {
			defer ended.Done()
			first := sync.OnceFunc(started.Done) // one answer, or the end
			defer first()
			for n := int32(0); ; n++ {
				f, fromBroker := req(n)
				if _, err := c.Write(f); err != nil {
					return
				}
				f, err := readFrame(c)
				if err != nil {
					return
				}
				if corrOf(f) != n {
					t.Errorf("response %d for request %d", corrOf(f), n)
				}
				if fromBroker {
					got.Add(1)
				}
				first()
			}
		}()
	}
	started.Wait()
	time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := env.srv.Drain(ctx)
	cancel()
	if err != nil {
		t.Fatalf("round %d: drain: %v", round, err)
	}
	ended.Wait()
	b.wg.Wait()
	if took, got := b.took.Load(), got.Load(); took != got {
		t.Fatalf("round %d: the broker read %d requests, the clients got %d responses: %d responses lost in the drain", round, took, got, took-got)
	}
}

// A response leaves the in-flight table before the batch holding it is
// flushed to the client. A drain that finds the table empty at that moment
// must wait for the flush, not close the connection under it: here the
// test holds the client writer as a response batch does, after its last
// entry was popped, and writes that response only once drain has run.
func TestDrainWaitsForTheResponseBeingWritten(t *testing.T) {
	up := startFakeUpstream(t, func(c net.Conn, f []byte) { echoResponse(c, f, []byte{0, 0, 0, 0, 0, 0}) })
	env := startProxy(t, up.addr())
	c := dialRaw(t, env.addr)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write(apiVersionsV0(1))
	if _, err := readFrame(c); err != nil {
		t.Fatal(err)
	}
	p := onlyPair(t, env)

	p.Conn().WMu.Lock() // a response batch, its entry popped, not yet flushed
	p.Conn().Drain()
	time.Sleep(100 * time.Millisecond) // time for a wrong close to happen
	if p.Conn().Closed() {
		p.Conn().WMu.Unlock() // (writing to the closed connection would panic in netpoll)
		t.Fatal("the drain closed the connection while a response was being written to it")
	}
	w := p.Client().Writer()
	_, err := w.WriteBinary([]byte{0, 0, 0, 6, 0, 0, 0, 2, 0, 0}) // a response frame with id 2
	if err == nil {
		err = w.Flush()
	}
	p.Conn().WMu.Unlock()
	if err != nil {
		t.Fatalf("the drain closed the connection while a response was being written: %v", err)
	}
	if f, err := readFrame(c); err != nil || corrOf(f) != 2 {
		t.Fatalf("the response being written when the drain began was lost: %x %v", f, err)
	}
	expectClosed(t, c, 5*time.Second)
}

// kproxy's own answer can be the last entry a draining pair owes: the
// drain must end once that answer is written, not wait for drain_timeout.
// The test holds the client writer (as a response batch being flushed
// does) while a refused request's answer queues behind it, starts the
// drain, then lets the answer go.
func TestDrainEndsAfterKproxysOwnAnswer(t *testing.T) {
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(1, "secret")})
	applyPolicies(t, env, denySecret)
	c := dialRaw(t, env.addr)
	c.SetDeadline(time.Now().Add(20 * time.Second))
	c.Write(apiVersionsV0(1))
	if _, err := readFrame(c); err != nil {
		t.Fatal(err)
	}
	p := onlyPair(t, env)

	p.Conn().WMu.Lock() // a response batch being written
	if _, err := c.Write(encodeRequest(produceRequest(7, 1, "secret"), 2)); err != nil {
		p.Conn().WMu.Unlock()
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); p.Conn().Sess.InFlight() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			p.Conn().WMu.Unlock()
			t.Fatal("the refused request never reached the in-flight table")
		}
	}
	const drainTimeout = 15 * time.Second
	drained := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
		defer cancel()
		drained <- env.srv.Drain(ctx)
	}()
	for !p.Conn().Stopping() {
		time.Sleep(time.Millisecond)
	}
	p.Conn().WMu.Unlock()
	f, err := readFrame(c)
	if err != nil || corrOf(f) != 2 {
		t.Fatalf("the refusal owed when the drain began was lost: %x %v", f, err)
	}
	if err := <-drained; err != nil {
		t.Fatalf("the drain did not end after kproxy's own answer, the last one owed: %v", err)
	}
	expectClosed(t, c, 5*time.Second)
}

// onlyPair is the one pair env's server holds.
func onlyPair(t *testing.T, env *testEnv) loop.Pair {
	t.Helper()
	ps := env.pairs()
	if len(ps) != 1 {
		t.Fatalf("%d pairs open, want one", len(ps))
	}
	return ps[0]
}
