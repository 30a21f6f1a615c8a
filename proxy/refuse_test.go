package proxy

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// expectReset dials kproxy and fails unless the connection is reset
// within d, at connect or at the first read: a client must see a refusal
// as a network fault to retry, not as an orderly close.
func expectReset(t testing.TB, addr string, d time.Duration) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, d)
	if errors.Is(err, syscall.ECONNRESET) {
		return
	}
	if err != nil {
		t.Fatalf("dial: %v, want a connection reset", err)
	}
	defer c.Close()
	// Only read: a write that met the reset would consume it, and the
	// read after it would see EOF.
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 64)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("read: %v, want a connection reset", err)
		}
		return
	}
}

// A client whose upstream cannot be dialled (a broker restarting) is
// reset, and the next client is paired once the broker is back.
func TestUnreachableUpstreamResetsClient(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	env := startProxy(t, addr)
	expectReset(t, env.addr, 2*time.Second)
	// The failure is counted after the reset is sent.
	waitFor(t, 10*time.Second, "the dial failure counted", func() bool { return testutil.ToFloat64(env.m.DialFailures) >= 1 })
	if n := testutil.ToFloat64(env.m.DialFailures); n != 1 {
		t.Fatalf("dial failures = %v, want 1", n)
	}

	startFakeUpstreamAt(t, addr, func(c net.Conn, f []byte) { echoResponse(c, f, []byte{0, 0}) })
	c := dialRaw(t, env.addr)
	c.Write(apiVersionsV0(2))
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if f, err := readFrame(c); err != nil || corrOf(f) != 2 {
		t.Fatalf("after the upstream came back: %v", err)
	}
}
