package proxy

import (
	"crypto/tls"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/policy"
)

func shortReadTimeout(_ *Config, f *framing.Config, _ *correlate.Config) {
	f.ReadTimeout = 300 * time.Millisecond
}

func dialFor(t *testing.T, name string, up string) (*testEnv, net.Conn) {
	if name == "netpoll" {
		env := startProxy(t, up, shortReadTimeout)
		return env, dialRaw(t, env.addr)
	}
	w := startTLSProxy(t, up, false, shortReadTimeout)
	c, err := tls.Dial("tcp", w.addr, w.clientTLS(t, tlsSides{client: true}, ""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return w.testEnv, c
}

// closedWithin reports whether kproxy closed c within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 1024)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		ne, ok := err.(net.Error)
		return !(ok && ne.Timeout())
	}
}

// A partial frame trickled a byte at a time, each gap under read_timeout,
// must still be bounded by read_timeout.
func TestDriversSlowLorisPartialFrame(t *testing.T) {
	for _, name := range []string{"netpoll", "tls"} {
		t.Run(name, func(t *testing.T) {
			up := startFakeUpstream(t, func(c net.Conn, f []byte) { echoResponse(c, f, []byte{0, 0}) })
			_, c := dialFor(t, name, up.addr())
			f := bigApiVersions(1, 1000)
			c.Write(f[:4])
			stop := time.Now().Add(2 * time.Second)
			i := 4
			for time.Now().Before(stop) && i < len(f)-1 {
				if _, err := c.Write(f[i : i+1]); err != nil {
					t.Logf("closed by kproxy after %d bytes: %v", i, err)
					return
				}
				i++
				time.Sleep(150 * time.Millisecond)
			}
			if !closedWithin(c, 100*time.Millisecond) {
				t.Errorf("a frame trickled for 2s with read_timeout 300ms is still open (%d of %d bytes sent)", i, len(f))
			}
		})
	}
}

// A frame refused by size and dropped as it arrives must still be bounded
// by read_timeout when the client stalls mid-body.
func TestDriversOversizeDropStall(t *testing.T) {
	for _, name := range []string{"netpoll", "tls"} {
		t.Run(name, func(t *testing.T) {
			up := startFakeUpstream(t, func(c net.Conn, f []byte) { echoResponse(c, f, []byte{0, 0}) })
			env, c0 := dialFor(t, name, up.addr())
			c0.Close()
			applyPolicies(t, env, policy.Rule{Name: "max", Action: policy.ActionReject,
				Limits: policy.Limits{MaxRequestBytes: 64 << 10}})
			var c net.Conn
			if name == "netpoll" {
				c = dialRaw(t, env.addr)
			} else {
				var err error
				c, err = tls.Dial("tcp", env.addr, &tls.Config{InsecureSkipVerify: true})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
			}
			f := bigApiVersions(1, 512<<10)
			binary.BigEndian.PutUint32(f, uint32(len(f)-4))
			c.Write(f[:4096]) // exactly the header peek, then stall
			start := time.Now()
			if !closedWithin(c, 3*time.Second) {
				t.Errorf("client stalled mid-body of a refused frame: still open after 3s (read_timeout 300ms)")
				return
			}
			t.Logf("closed after %v", time.Since(start))
			t.Logf("log: %s", env.logs)
		})
	}
}
