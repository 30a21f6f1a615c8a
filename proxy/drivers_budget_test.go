package proxy

import (
	"crypto/tls"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
)

// bigApiVersions is an ApiVersions v0 request padded to n bytes in all.
func bigApiVersions(corr int32, n int) []byte {
	f := apiVersionsV0(corr)
	f = append(f, make([]byte, n-len(f))...)
	binary.BigEndian.PutUint32(f, uint32(n-4))
	return f
}

func smallBudget(c *Config, f *framing.Config, _ *correlate.Config) {
	f.MaxRequestBytes, f.MaxResponseBytes = 1<<20, 1<<20
	c.MaxBufferedBytes = 1<<20 + 512<<10
}

// driverCase starts kproxy on one driver in front of up, and dials it.
type driverCase struct {
	name  string
	start func(t *testing.T, up string) (*testEnv, func() net.Conn)
}

// bothDrivers are the netpoll driver (plaintext) and the stream driver
// (TLS to clients): every bound holds on both.
var bothDrivers = []driverCase{
	{"netpoll", func(t *testing.T, up string) (*testEnv, func() net.Conn) {
		env := startProxy(t, up, smallBudget)
		return env, func() net.Conn { return dialRaw(t, env.addr) }
	}},
	{"tls", func(t *testing.T, up string) (*testEnv, func() net.Conn) {
		w := startTLSProxy(t, up, false, smallBudget)
		return w.testEnv, func() net.Conn {
			c, err := tls.Dial("tcp", w.addr, w.clientTLS(t, tlsSides{client: true}, ""))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		}
	}},
}

// An idle connection that once relayed a large frame gives its budget
// back; a second client's large frame is relayed.
func TestDriversBudgetHeldByIdleConnection(t *testing.T) {
	for _, d := range bothDrivers {
		t.Run(d.name, func(t *testing.T) {
			up := startFakeUpstream(t, func(c net.Conn, f []byte) { echoResponse(c, f, []byte{0, 0}) })
			env, dial := d.start(t, up.addr())
			const n = 1<<20 - 100
			a := dial()
			a.Write(bigApiVersions(1, n))
			a.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := readFrame(a); err != nil {
				t.Fatalf("A: %v", err)
			}
			// netpoll gives it back at once, the stream driver once A
			// has idled for shrinkAfter.
			waitFor(t, 10*time.Second, "A's charge given back while it idles", func() bool { return env.srv.core.Budget.Used() == 0 })
			b := dial()
			b.Write(bigApiVersions(2, n))
			b.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := readFrame(b); err != nil {
				t.Errorf("B (while A idles) refused: %v; budget used %d", err, env.srv.core.Budget.Used())
			}
		})
	}
}

// A client that sent only a 4-byte size prefix holds no budget for bytes
// it never sent.
func TestDriversBudgetChargedByPrefixOnly(t *testing.T) {
	for _, d := range bothDrivers {
		t.Run(d.name, func(t *testing.T) {
			up := startFakeUpstream(t, func(c net.Conn, f []byte) { echoResponse(c, f, []byte{0, 0}) })
			env, dial := d.start(t, up.addr())
			const n = 1<<20 - 100
			a := dial()
			a.Write(bigApiVersions(1, n)[:4]) // the prefix only
			time.Sleep(300 * time.Millisecond)
			t.Logf("budget used after a 4-byte prefix: %d", env.srv.core.Budget.Used())
			b := dial()
			b.Write(bigApiVersions(2, n))
			b.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := readFrame(b); err != nil {
				t.Errorf("B refused while A sent 4 bytes: %v; budget used %d", err, env.srv.core.Budget.Used())
			}
		})
	}
}

// The same with large responses (a consumer's fetches): a consumer that
// once got a large fetch and now idles gives its budget back, and the
// next consumer's large fetch is relayed.
func TestDriversBudgetHeldAfterLargeResponse(t *testing.T) {
	for _, d := range bothDrivers {
		t.Run(d.name, func(t *testing.T) {
			body := make([]byte, 1<<20-200)
			up := startFakeUpstream(t, func(c net.Conn, f []byte) { echoResponse(c, f, body) })
			env, dial := d.start(t, up.addr())
			a := dial()
			a.Write(apiVersionsV0(1))
			a.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := readFrame(a); err != nil {
				t.Fatalf("A: %v", err)
			}
			// netpoll gives it back at once, the stream driver once A
			// has idled for shrinkAfter.
			waitFor(t, 10*time.Second, "A's charge given back while it idles", func() bool { return env.srv.core.Budget.Used() == 0 })
			b := dial()
			b.Write(apiVersionsV0(2))
			b.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := readFrame(b); err != nil {
				t.Errorf("B's large response (A idle) failed: %v; budget used %d\n%s", err, env.srv.core.Budget.Used(), env.logs)
			}
		})
	}
}
