package proxy

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/tlsconf"
)

// Idle handshakes neither lock real TLS clients out nor hold memory the
// budget does not see (issue 27, items 4 and 5): with max_connections 20
// and max_handshakes 10, 40 sockets that connect and send nothing hold no
// connection slot, at most 10 of them reserve their buffers in
// kproxy_buffered_bytes, and a real client's handshake drops the stalest
// and is served at once. Before, 100 such sockets locked TLS clients out
// for the whole handshake_timeout.
func TestTLSIdleHandshakesLockNoOneOut(t *testing.T) {
	w := startTLSKfake(t, tlsSides{client: true}, []kfake.Opt{kfake.SeedTopics(1, "t")}, func(c *tlsconf.Config) {
		c.Listener.MaxHandshakes = 10
		c.Listener.HandshakeTimeout = time.Minute // the idle ones would hold out all test long
	}, func(cfg *Config, _ *framing.Config, _ *correlate.Config) { cfg.MaxConnections = 20 })
	for range 40 {
		c := dialRaw(t, w.addr)
		_ = c
	}
	waitFor(t, 10*time.Second, "the handshakes reserved", func() bool {
		return testutil.ToFloat64(w.m.Buffered) >= 10*(256<<10)
	})
	// A dropped handshake gives its reservation back as its goroutine
	// ends, a moment after the newcomer took one.
	waitFor(t, 10*time.Second, "at most max_handshakes reservations", func() bool {
		return testutil.ToFloat64(w.m.Buffered) <= 10*(272<<10)
	})
	// A real client, three times over: each gets in at once.
	for i := range 3 {
		start := time.Now()
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", w.addr, w.clientTLS(t, tlsSides{client: true}, ""))
		if err != nil {
			t.Fatalf("client %d behind 40 idle handshakes: %v", i, err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(apiVersionsV0(int32(i))); err != nil {
			t.Fatal(err)
		}
		if _, err := readFrame(c); err != nil {
			t.Fatalf("client %d not relayed: %v", i, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("client %d took %v", i, d)
		}
		c.Close()
	}
	if got := w.refused("max_connections"); got != 0 {
		t.Fatalf("%v clients refused for max_connections: idle handshakes held slots", got)
	}
	// Each newcomer past the cap dropped one idle handshake, counted as
	// such: 30 of the idle ones, then the first real client's (the cap
	// had room for the next two).
	waitFor(t, 10*time.Second, "the dropped handshakes counted", func() bool {
		return w.handshakes(tlsconf.SideClient, tlsconf.ResultEvicted) >= 40-10+1
	})
}
