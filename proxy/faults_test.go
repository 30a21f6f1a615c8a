package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/proxy/loop"
)

func apiVersionsV0(corr int32) []byte {
	r := kmsg.NewPtrApiVersionsRequest()
	r.Version = 0
	return encodeRequest(r, corr)
}

// When the upstream dies with requests in flight, the answered ones reach
// their requests, the client connection closes promptly, and the rest are
// counted as failed: nothing reaches the wrong request.
func TestUpstreamKilledMidStream(t *testing.T) {
	var seen atomic.Int32
	var up *fakeUpstream
	up = startFakeUpstream(t, func(c net.Conn, f []byte) {
		switch n := seen.Add(1); {
		case n <= 3:
			echoResponse(c, f, []byte{0, 0})
		case n == 6:
			go up.close()
		}
	})
	env := startProxy(t, up.addr())
	c := dialRaw(t, env.addr)
	var batch []byte
	for i := 0; i < 6; i++ {
		batch = append(batch, apiVersionsV0(int32(-10-i))...)
	}
	c.Write(batch)
	// kproxy has no timer under 30s that would close this client (read
	// and write timeouts are 30s): a close before this deadline is its
	// answer to the upstream's death, however loaded the machine.
	const deadline = 20 * time.Second
	c.SetReadDeadline(time.Now().Add(deadline))
	for i := 0; i < 3; i++ {
		f, err := readFrame(c)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		if corrOf(f) != int32(-10-i) {
			t.Fatalf("response %d has id %d, want %d", i, corrOf(f), -10-i)
		}
	}
	start := time.Now()
	f, err := readFrame(c)
	if err == nil {
		t.Fatalf("got a response (id %d) after the upstream died", corrOf(f))
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("client connection still open %v after the upstream died", deadline)
	}
	t.Logf("client connection closed %v after the upstream died", time.Since(start))
	waitFor(t, 10*time.Second, "3 failed requests counted", func() bool { return testutil.ToFloat64(env.m.Relay.Failed) == 3 })
	if g := testutil.ToFloat64(env.m.Relay.InFlight); g != 0 {
		t.Fatalf("in-flight gauge %v after close, want 0", g)
	}
}

// A response whose correlation id matches no request closes that pair,
// counts a protocol error and logs both ids; another pair is unharmed.
func TestCorrelationMismatchIsolated(t *testing.T) {
	up := startFakeUpstream(t, func(c net.Conn, f []byte) {
		if corrOf(f) >= 0 { // kproxy's ids start at 0; the second pair starts there too
			echoResponse(c, f, []byte{0, 0})
		}
	})
	bad := startFakeUpstream(t, func(c net.Conn, f []byte) {
		binary.BigEndian.PutUint32(f[8:], 999)
		echoResponse(c, f, []byte{0, 0})
	})
	env := startProxy(t, bad.addr())
	good := startProxy(t, up.addr())
	c := dialRaw(t, env.addr)
	c.Write(apiVersionsV0(5))
	expectClosed(t, c, 10*time.Second)
	// The pair is counted once closed, which the client may see first.
	waitFor(t, 10*time.Second, "one correlation mismatch counted", func() bool {
		return testutil.ToFloat64(env.m.ProtocolErrs.WithLabelValues("correlation_mismatch")) == 1
	})
	if !env.logs.contains(`"upstream_id":999`) || !env.logs.contains(`"client_id":5`) {
		t.Fatalf("log does not name both ids:\n%s", env.logs)
	}
	// Same process, another kproxy and client keep working.
	g := dialRaw(t, good.addr)
	g.Write(apiVersionsV0(6))
	g.SetReadDeadline(time.Now().Add(2 * time.Second))
	if f, err := readFrame(g); err != nil || corrOf(f) != 6 {
		t.Fatalf("healthy pair: %v %v", f, err)
	}
}

// The size prefix is checked before anything is buffered for the body: a
// 1 GiB prefix is refused at once, without the heap growing by it.
func TestOversizePrefixRefused(t *testing.T) {
	up := startFakeUpstream(t, func(c net.Conn, f []byte) { echoResponse(c, f, []byte{0, 0}) })
	env := startProxy(t, up.addr(), func(_ *Config, fc *framing.Config, _ *correlate.Config) { fc.MaxRequestBytes = 1 << 20 })
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := dialRaw(t, env.addr)
	c.Write([]byte{0x3f, 0xff, 0xff, 0xff, 0, 18, 0, 0})
	expectClosed(t, c, 10*time.Second)
	runtime.ReadMemStats(&after)
	if grew := int64(after.TotalAlloc - before.TotalAlloc); grew > 64<<20 {
		t.Fatalf("heap allocations grew by %d bytes for a refused frame", grew)
	}
	waitFor(t, 10*time.Second, "one oversize close counted", func() bool {
		return testutil.ToFloat64(env.m.Oversize.WithLabelValues("client")) == 1
	})
	if !env.logs.contains("exceeds limit 1048576") {
		t.Fatalf("log does not explain the refusal:\n%s", env.logs)
	}
}

// Bytes that are not Kafka are refused with a line that says what they
// look like.
func TestNonKafkaInputRefusedClearly(t *testing.T) {
	up := startFakeUpstream(t, func(c net.Conn, f []byte) { echoResponse(c, f, []byte{0, 0}) })
	cases := []struct {
		name, send, log string
	}{
		{"tls", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", "TLS ClientHello"},
		{"http", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP request"},
		{"garbage", "\x00\x00\x00\x03abc", "malformed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := startProxy(t, up.addr())
			c := dialRaw(t, env.addr)
			c.Write([]byte(tc.send))
			expectClosed(t, c, 10*time.Second)
			waitFor(t, 10*time.Second, "log line", func() bool { return env.logs.contains(tc.log) })
		})
	}
}

// A partial frame followed by silence is closed after read_timeout.
func TestPartialFrameTimesOut(t *testing.T) {
	up := startFakeUpstream(t, func(c net.Conn, f []byte) { echoResponse(c, f, []byte{0, 0}) })
	env := startProxy(t, up.addr(), func(_ *Config, fc *framing.Config, _ *correlate.Config) { fc.ReadTimeout = 300 * time.Millisecond })
	c := dialRaw(t, env.addr)
	c.Write([]byte{0, 0, 0, 100, 0, 18, 0, 0, 0, 0})
	start := time.Now()
	expectClosed(t, c, 10*time.Second)
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("closed after %v, before the read timeout", d)
	}
	waitFor(t, 10*time.Second, "log line", func() bool { return env.logs.contains("stalled inside a frame") })
}

// A client that floods requests at an upstream that never answers is
// closed at max_unread_bytes instead of growing kproxy's memory.
func TestFloodAtStalledUpstreamIsBounded(t *testing.T) {
	up := startFakeUpstream(t, func(net.Conn, []byte) {}) // never answers
	env := startProxy(t, up.addr(), func(cfg *Config, fc *framing.Config, cc *correlate.Config) {
		fc.MaxRequestBytes, fc.MaxResponseBytes = 64<<10, 64<<10
		cfg.MaxUnreadBytes = 1 << 20
		cc.MaxInFlight = 8
	})
	c := dialRaw(t, env.addr)
	frame := apiVersionsV0(1)
	batch := make([]byte, 0, 64<<10)
	for len(batch)+len(frame) <= cap(batch) {
		batch = append(batch, frame...)
	}
	c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	var err error
	for sent := 0; sent < 64<<20 && err == nil; sent += len(batch) {
		_, err = c.Write(batch)
	}
	if err == nil {
		expectClosed(t, c, 10*time.Second)
	}
	waitFor(t, 10*time.Second, "overflow close counted", func() bool {
		return testutil.ToFloat64(env.m.Overflow.WithLabelValues("client")) == 1
	})
}

// A client that floods acks=0 requests (no in-flight entries, so no
// backpressure) at an upstream that has stopped reading blocks the relay's
// flush; the unread input it piles up meanwhile is still closed at
// max_unread_bytes, well before write_timeout.
func TestFloodAtUpstreamThatStopsReadingIsBounded(t *testing.T) {
	// Both ways a write to the upstream blocks: handed to a goroutine
	// from the poller, and in the relay's own flush with a linger.
	for _, linger := range []time.Duration{0, 5 * time.Millisecond} {
		t.Run("linger="+linger.String(), func(t *testing.T) { floodUpstreamThatStopsReading(t, linger) })
	}
}

func floodUpstreamThatStopsReading(t *testing.T, linger time.Duration) {
	const bound, slack = 1 << 20, 5 << 20
	// A small receive buffer (inherited by accepted sockets) makes kproxy's
	// writes block after a few MiB, whatever the host's TCP autotuning.
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<10)
		})
		return errors.Join(err, serr)
	}}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go acceptAndNeverRead(ln)
	env := startProxy(t, ln.Addr().String(), func(cfg *Config, fc *framing.Config, _ *correlate.Config) {
		fc.MaxRequestBytes, fc.MaxResponseBytes = 64<<10, 64<<10
		cfg.MaxUnreadBytes = bound
		cfg.WriteTimeout = time.Minute
		cfg.Linger = linger
	})
	c := dialRaw(t, env.addr)
	// 8 KiB frames, two per write: few enough frames that the relay keeps
	// up with the pacing even under the race detector.
	req := produceRequest(7, 0, "flood")
	req.Topics[0].Partitions[0].Records = make([]byte, 8<<10)
	frame := encodeRequest(req, 1)
	batch := append(append([]byte(nil), frame...), frame...)
	// Idle first, long enough for the sweep to find nothing waiting and
	// sleep: the flood must wake it.
	time.Sleep(5 * loop.OverflowSweep)
	c.SetWriteDeadline(time.Now().Add(30 * time.Second))
	// The flood is paced (16 KiB a millisecond) so that the relay keeps up
	// until the socket buffers fill and its write blocks. From then on
	// only the overflow sweep sees the input grow, so the peak is the bound
	// plus what arrives in about one sweep. When the sweep slept through
	// the flood, the input grew past 250 MiB here.
	peak := watchUnread(t, env.srv)
	const most = 64 << 20
	sent := 0
	for ; sent < most && err == nil; sent += len(batch) {
		_, err = c.Write(batch)
		time.Sleep(time.Millisecond)
	}
	mib := func(n int) float64 { return float64(n) / (1 << 20) }
	switch {
	case err == nil:
		t.Fatalf("%.0f MiB written without kproxy closing the connection (peak unread input %.1f MiB)", mib(most), mib(peak()))
	case errors.Is(err, os.ErrDeadlineExceeded):
		t.Fatalf("kproxy neither read nor closed for 30 s: %v", err)
	}
	t.Logf("closed after %.1f MiB sent; peak unread input %.1f MiB", mib(sent), mib(peak()))
	if max := peak(); max > bound+slack {
		t.Fatalf("the client's unread input reached %.1f MiB (bound 1 MiB): the overflow sweep did not close the pair in time", mib(max))
	}
	waitFor(t, 10*time.Second, "overflow close counted", func() bool {
		return testutil.ToFloat64(env.m.Overflow.WithLabelValues("client")) == 1
	})
}

// watchUnread samples, every millisecond until the test ends, the largest
// unread client input of any of srv's pairs, and returns a function that
// reports the peak seen so far.
func watchUnread(t *testing.T, srv *Server) func() int {
	var peak atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for _, p := range serverPairs(srv) {
				if n := int64(p.Client().Reader().Len()); n > peak.Load() {
					peak.Store(n)
				}
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return func() int { return int(peak.Load()) }
}

// acceptAndNeverRead accepts every connection to ln and never reads from
// it: an upstream that stopped reading. They are closed when ln is.
func acceptAndNeverRead(ln net.Listener) {
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		held = append(held, c)
	}
}
