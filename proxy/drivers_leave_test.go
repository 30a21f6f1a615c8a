package proxy

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
)

// A client that leaves while its relay waits for room in a full table
// (the broker slow to answer) has its pair closed.
func TestDriversClientGoneWhileTableFull(t *testing.T) {
	small := func(_ *Config, _ *framing.Config, cc *correlate.Config) { cc.MaxInFlight = 2 }
	for _, name := range []string{"netpoll", "tls"} {
		t.Run(name, func(t *testing.T) {
			up := startFakeUpstream(t, func(c net.Conn, f []byte) {}) // never answers
			var env *testEnv
			var c net.Conn
			if name == "netpoll" {
				env = startProxy(t, up.addr(), small)
				c = dialRaw(t, env.addr)
			} else {
				w := startTLSProxy(t, up.addr(), false, small)
				env = w.testEnv
				var err error
				if c, err = tls.Dial("tcp", w.addr, w.clientTLS(t, tlsSides{client: true}, "")); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 3 {
				c.Write(apiVersionsV0(int32(i)))
			}
			waitFor(t, 5*time.Second, "two in flight", func() bool { return testutil.ToFloat64(env.m.Relay.InFlight) == 2 })
			time.Sleep(100 * time.Millisecond)
			c.Close()
			// Well under read_timeout (30s), the only other timer that
			// could close it.
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) && testutil.ToFloat64(env.m.Open) != 0 {
				time.Sleep(20 * time.Millisecond)
			}
			if n := testutil.ToFloat64(env.m.Open); n != 0 {
				t.Errorf("client closed 10s ago, pair still open (%v open)", n)
			}
		})
	}
}
