package proxy

import (
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
)

// One kproxy carries 1,000 concurrent client connections, each with its
// own upstream, each getting its own answers.
func TestThousandConcurrentConnections(t *testing.T) {
	const conns = 1000
	// client, accepted, upstream and broker-side sockets: 4 per connection.
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < 4*conns+256 {
		lim.Cur = min(lim.Max, 4*conns+256)
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < 4*conns+256 {
			t.Fatalf("need %d open files, have %d (raise `ulimit -n`): %v", 4*conns+256, lim.Cur, err)
		}
	}
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(1, "t")})
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	open := make([]net.Conn, conns)
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", env.addr, 10*time.Second)
			if err != nil {
				errs <- err
				return
			}
			open[i] = c
			md := kmsg.NewPtrMetadataRequest()
			md.Version = 9
			req := append(apiVersionsV0(int32(i)), encodeRequest(md, int32(-i))...)
			c.SetDeadline(time.Now().Add(60 * time.Second))
			if _, err := c.Write(req); err != nil {
				errs <- err
				return
			}
			for _, want := range []int32{int32(i), int32(-i)} {
				f, err := readFrame(c)
				if err != nil {
					errs <- err
					return
				}
				if corrOf(f) != want {
					t.Errorf("conn %d: response id %d, want %d", i, corrOf(f), want)
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(env.m.Open); n != conns {
		t.Fatalf("open connections gauge %v, want %d", n, conns)
	}
	for _, c := range open {
		c.Close()
	}
	waitFor(t, 10*time.Second, "every pair closed", func() bool { return testutil.ToFloat64(env.m.Open) == 0 })
}

// Past max_connections new clients are refused and counted; the ones
// already paired keep working.
func TestMaxConnections(t *testing.T) {
	up := startFakeUpstream(t, func(c net.Conn, f []byte) { echoResponse(c, f, []byte{0, 0}) })
	env := startProxy(t, up.addr(), func(cfg *Config, _ *framing.Config, _ *correlate.Config) { cfg.MaxConnections = 2 })
	a, b := dialRaw(t, env.addr), dialRaw(t, env.addr)
	waitFor(t, 10*time.Second, "two pairs", func() bool { return testutil.ToFloat64(env.m.Open) == 2 })
	expectReset(t, env.addr, 2*time.Second)
	// The refusal is counted after the reset is sent.
	waitFor(t, 10*time.Second, "the refusal counted", func() bool {
		return testutil.ToFloat64(env.m.Refused.WithLabelValues("max_connections")) >= 1
	})
	if n := testutil.ToFloat64(env.m.Refused.WithLabelValues("max_connections")); n != 1 {
		t.Fatalf("refused = %v, want 1", n)
	}
	for i, conn := range []net.Conn{a, b} {
		conn.Write(apiVersionsV0(int32(i)))
		conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		if f, err := readFrame(conn); err != nil || corrOf(f) != int32(i) {
			t.Fatalf("paired connection %d: %v", i, err)
		}
	}
}

// A client refused at max_connections costs no upstream connection: the
// slot is taken before the upstream is dialled (issue 14, item 7).
func TestMaxConnectionsRefusesBeforeDialling(t *testing.T) {
	up := startFakeUpstream(t, func(c net.Conn, f []byte) { echoResponse(c, f, []byte{0, 0}) })
	env := startProxy(t, up.addr(), func(cfg *Config, _ *framing.Config, _ *correlate.Config) { cfg.MaxConnections = 2 })
	a, b := dialRaw(t, env.addr), dialRaw(t, env.addr)
	waitFor(t, 10*time.Second, "two pairs", func() bool { return testutil.ToFloat64(env.m.Open) == 2 })
	const attempts = 50
	for i := 0; i < attempts; i++ {
		expectReset(t, env.addr, 2*time.Second)
	}
	// Each refusal is counted after its reset is sent.
	waitFor(t, 10*time.Second, "every refusal counted", func() bool {
		return testutil.ToFloat64(env.m.Refused.WithLabelValues("max_connections")) >= attempts
	})
	if n := testutil.ToFloat64(env.m.Refused.WithLabelValues("max_connections")); n != attempts {
		t.Fatalf("refused = %v, want %d", n, attempts)
	}
	for i, conn := range []net.Conn{a, b} {
		conn.Write(apiVersionsV0(int32(i)))
		conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		if f, err := readFrame(conn); err != nil || corrOf(f) != int32(i) {
			t.Fatalf("paired connection %d: %v", i, err)
		}
	}
	up.mu.Lock()
	dialled := len(up.conns)
	up.mu.Unlock()
	if dialled != 2 {
		t.Fatalf("upstream accepted %d connections for 2 paired clients and %d refused ones, want 2", dialled, attempts)
	}
	// A slot freed by a close is taken again.
	a.Close()
	waitFor(t, 10*time.Second, "a slot given back", func() bool { return env.srv.core.Slots() == 1 })
	c := dialRaw(t, env.addr)
	c.Write(apiVersionsV0(7))
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if f, err := readFrame(c); err != nil || corrOf(f) != 7 {
		t.Fatalf("client after a close: %v", err)
	}
}
