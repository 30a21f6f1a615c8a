package proxy

import (
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/cloudwego/netpoll"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
)

// serialRoundTrips sends n ApiVersions requests one at a time through
// env and checks each answer's correlation id.
func serialRoundTrips(t *testing.T, env *testEnv, n int) {
	t.Helper()
	c := dialRaw(t, env.addr)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	for i := 0; i < n; i++ {
		if _, err := c.Write(apiVersionsV0(int32(i))); err != nil {
			t.Fatal(err)
		}
		f, err := readFrame(c)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		if got := corrOf(f); got != int32(i) {
			t.Fatalf("response %d has correlation id %d", i, got)
		}
	}
}

func batches(env *testEnv, dir, where int) float64 {
	return testutil.ToFloat64(env.m.batch[dir][where])
}

// With linger 0 (the default) whole frames are relayed on the poller in
// both directions; the response side needs the upstream connection's
// context, which netpoll has no option for.
func TestSerialBatchesRelayOnThePoller(t *testing.T) {
	env := startKfake(t, nil)
	serialRoundTrips(t, env, 50)
	for dir, name := range []string{"requests", "responses"} {
		if got := batches(env, dir, onPoller); got < 40 {
			t.Errorf("%s: %v of 50 batches relayed on the poller (pool: %v)", name, got, batches(env, dir, inPool))
		}
	}
}

// A linger keeps a goroutine per busy connection: nothing runs on the
// poller.
func TestLingerKeepsBatchesInThePool(t *testing.T) {
	env := startKfake(t, nil, func(c *Config, _ *framing.Config, _ *correlate.Config) { c.Linger = 5 * time.Millisecond })
	serialRoundTrips(t, env, 20)
	for dir, name := range []string{"requests", "responses"} {
		if got := batches(env, dir, onPoller); got != 0 {
			t.Errorf("%s: %v batches relayed on the poller with a linger", name, got)
		}
	}
}

// When a socket does not take a whole batch, the rest is flushed by a
// goroutine, and everything sent after it waits: a client that stops
// reading while large responses pile up, and an upstream that stops
// reading while requests pile up, still get every frame whole and in
// order.
func TestSlowPeersKeepOrderAcrossHandOffs(t *testing.T) {
	const n, respBody = 400, 48 << 10
	body := make([]byte, respBody)
	pause := make(chan struct{})
	up := startFakeUpstream(t, func(c net.Conn, req []byte) {
		if corrOf(req) == 0 {
			<-pause // requests pile up in kproxy's upstream socket
		}
		echoResponse(c, req, body)
	})
	env := startProxy(t, up.addr(), func(_ *Config, _ *framing.Config, cc *correlate.Config) { cc.MaxInFlight = n })
	c := dialRaw(t, env.addr)
	req := make([]byte, 4<<10)
	binary.BigEndian.PutUint32(req, uint32(len(req)-4))
	binary.BigEndian.PutUint16(req[4:], 18) // ApiVersions v0, header v1
	go func() {
		for i := 0; i < n; i++ {
			binary.BigEndian.PutUint32(req[8:], uint32(i))
			binary.BigEndian.PutUint16(req[12:], 0) // empty client id
			if _, err := c.Write(req); err != nil {
				return
			}
		}
	}()
	time.Sleep(300 * time.Millisecond)
	close(pause)
	time.Sleep(300 * time.Millisecond) // responses pile up while the client does not read
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	for i := 0; i < n; i++ {
		f, err := readFrame(c)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		if corrOf(f) != int32(i) || len(f) != 8+respBody {
			t.Fatalf("response %d: correlation id %d, %d bytes", i, corrOf(f), len(f))
		}
	}
}

// setUpstreamContext depends on netpoll's connection layout; if an upgrade
// changes it, this says so rather than kproxy silently relaying responses
// from the pool.
func TestSetUpstreamContextReachesTheRunner(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Write([]byte("ping"))
			defer c.Close()
			time.Sleep(2 * time.Second)
		}
	}()
	up, err := netpoll.DialConnection("tcp", ln.Addr().String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	if !setUpstreamContext(up, context.WithValue(context.Background(), upstreamKey{}, "marked")) {
		t.Fatal("setUpstreamContext could not set the dialed connection's context: netpoll's layout changed")
	}
	got := make(chan any, 1)
	up.SetOnRequest(func(ctx context.Context, c netpoll.Connection) error {
		c.Reader().Skip(c.Reader().Len())
		c.Reader().Release()
		select {
		case got <- ctx.Value(upstreamKey{}):
		default:
		}
		return nil
	})
	select {
	case v := <-got:
		if v != "marked" {
			t.Fatalf("the handler ran with context value %v", v)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler never ran")
	}
}
