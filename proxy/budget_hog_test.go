package proxy

import (
	"encoding/binary"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/proxy/loop"
)

// peakCharged samples what is charged to the budget until the test ends,
// and returns the most seen so far.
func peakCharged(t *testing.T, env *testEnv) func() float64 {
	var peak atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if v := int64(testutil.ToFloat64(env.m.Buffered)); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return func() float64 { return float64(peak.Load()) }
}

// Responses waiting for clients that do not read are charged to the
// budget while kproxy flushes them (they stay in netpoll's input buffers
// until then), so many slow readers cannot each pin a maximum-size frame
// outside max_buffered_bytes: the one holding most is closed, blamed on
// the client (issue 14, item 5).
func TestBufferBudgetChargesBatchesWaitingForASlowReader(t *testing.T) {
	const budget = 20 << 20 // room for two bigResponse batches, not three
	body := make([]byte, bigResponse)
	up := startFakeUpstream(t, func(c net.Conn, f []byte) { echoResponse(c, f, body) })
	env := startProxy(t, up.addr(), func(cfg *Config, fc *framing.Config, _ *correlate.Config) {
		fc.MaxRequestBytes, fc.MaxResponseBytes = 9<<20, 9<<20
		cfg.MaxBufferedBytes = budget
		cfg.WriteTimeout = time.Minute // the readers are never closed as stalled here
	})
	peak := peakCharged(t, env)
	// A slow reader's batch is blamed on the client; a response that
	// arrives whole while the budget is full, as large as the batches
	// waiting, on the upstream whose input it is.
	closes := func() int {
		return int(testutil.ToFloat64(env.m.OverBudget.WithLabelValues("client")) +
			testutil.ToFloat64(env.m.OverBudget.WithLabelValues("upstream")))
	}
	// flushing counts the pairs whose whole response is being flushed to
	// a client that does not read it.
	flushing := func() int {
		n := 0
		for _, p := range env.pairs() {
			if p.Flushing(loop.ToClient) && p.Upstream().Reader().Len() == 0 {
				n++
			}
		}
		return n
	}
	// One at a time, so no two responses are ever partial at once: only
	// what waits in a flush can take the budget past its bound.
	for i := range 3 {
		c := dialSmallWindow(t, env.addr)
		if _, err := c.Write(apiVersionsV0(int32(i))); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the response flushing", func() bool { return flushing()+closes() >= i+1 })
	}
	waitFor(t, 10*time.Second, "a slow reader closed for the budget", func() bool { return closes() >= 1 })
	if !env.logs.contains(`"reason":"client reads too slowly`) && !env.logs.contains(`"reason":"upstream input over max_buffered_bytes"`) {
		t.Fatalf("no close logged for the budget: %s", env.logs)
	}
	if p := peak(); p > budget {
		t.Fatalf("charged %v bytes at the peak, over max_buffered_bytes %d", p, budget)
	}
	// The two readers left are charged what waits for them.
	waitFor(t, 10*time.Second, "the responses waiting charged", func() bool {
		return env.srv.core.Budget.Used() >= 2*bigResponse
	})
	if used := env.srv.core.Budget.Used(); used > budget {
		t.Fatalf("charged %d bytes, over max_buffered_bytes %d", used, budget)
	}
}

// When the budget is full, the connection holding the most is closed, not
// the one that grows last: hogs that each sent part of a large frame and
// stopped do not get an honest client's larger request refused (issue 14,
// item 5: "others are unharmed").
func TestBufferBudgetClosesTheLargestHolder(t *testing.T) {
	const (
		budget = 4 << 20
		frame  = 2 << 20    // each hog announces this much
		sent   = 1300 << 10 // and sends this much of it, then waits
		hogs   = 3          // 3,900 KiB: the budget is all but full
		honest = 400 << 10  // then this request needs 200 KiB more than is left
	)
	up := startFakeUpstream(t, func(c net.Conn, f []byte) { echoResponse(c, f, []byte{0, 0}) })
	env := startProxy(t, up.addr(), func(cfg *Config, fc *framing.Config, _ *correlate.Config) {
		fc.MaxRequestBytes, fc.MaxResponseBytes = frame, frame
		fc.ReadTimeout = 30 * time.Second
		cfg.MaxBufferedBytes = budget
	})
	peak := peakCharged(t, env)
	conns := make([]net.Conn, hogs)
	for i := range conns {
		conns[i] = dialRaw(t, env.addr)
		part := make([]byte, sent)
		binary.BigEndian.PutUint32(part, frame-framing.SizeLen)
		if _, err := conns[i].Write(part); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "the hogs charged", func() bool { return env.srv.core.Budget.Used() == hogs*sent })

	// The honest request, sent in pieces so that it is charged while it
	// is partial.
	req := apiVersionsV0(7)
	req = append(req, make([]byte, honest-len(req))...)
	binary.BigEndian.PutUint32(req, uint32(len(req)-framing.SizeLen))
	c := dialRaw(t, env.addr)
	for off := 0; off < len(req); off += 100 << 10 {
		if _, err := c.Write(req[off:min(off+100<<10, len(req))]); err != nil {
			t.Fatalf("honest client: %v (kproxy: %s)", err, env.logs)
		}
		time.Sleep(30 * time.Millisecond) // a few sweeps see it partial
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if f, err := readFrame(c); err != nil || corrOf(f) != 7 {
		t.Fatalf("honest client not served: %v (kproxy: %s)", err, env.logs)
	}
	// A hog's close frees its charge before the close is counted, so the
	// honest client may be served first.
	waitFor(t, 10*time.Second, "a hog's budget close counted", func() bool {
		return testutil.ToFloat64(env.m.OverBudget.WithLabelValues("client")) >= 1
	})
	hogClosed := false
	for _, h := range conns {
		h.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := h.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
			hogClosed = true
		}
	}
	if !hogClosed {
		t.Fatalf("no hog closed (kproxy: %s)", env.logs)
	}
	if p := peak(); p > budget {
		t.Fatalf("charged %v bytes at the peak, over max_buffered_bytes %d", p, budget)
	}
}
