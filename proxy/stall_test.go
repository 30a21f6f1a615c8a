package proxy

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
)

// bigResponse is the body a fake upstream answers every request with: more
// than the socket buffers between kproxy and a client hold, so a client
// that reads slowly keeps kproxy's flush waiting well past write_timeout.
const bigResponse = 8 << 20

// startBigUpstream runs kproxy, with write_timeout d, in front of an
// upstream that answers each request with a bigResponse-byte body.
func startBigUpstream(t *testing.T, d time.Duration) *testEnv {
	t.Helper()
	body := make([]byte, bigResponse)
	up := startFakeUpstream(t, func(c net.Conn, f []byte) { echoResponse(c, f, body) })
	return startProxy(t, up.addr(), func(cfg *Config, _ *framing.Config, _ *correlate.Config) { cfg.WriteTimeout = d })
}

// dialSmallWindow opens a client whose receive buffer is small, so kproxy
// can only send as fast as it reads.
func dialSmallWindow(t *testing.T, addr string) net.Conn {
	t.Helper()
	c := dialRaw(t, addr)
	if err := c.(*net.TCPConn).SetReadBuffer(32 << 10); err != nil {
		t.Fatal(err)
	}
	return c
}

// write_timeout bounds a stall, not a whole write: a consumer that reads a
// large response slowly but steadily gets all of it, although it takes
// longer than write_timeout (issue 14, item 6).
func TestWriteTimeoutSparesASlowSteadyReader(t *testing.T) {
	// write_timeout is far above the reader's gaps (10ms), so no
	// scheduling delay on a loaded machine reads as a stall; 256 gaps
	// still make the response take longer than it.
	const timeout = 2 * time.Second
	env := startBigUpstream(t, timeout)
	c := dialSmallWindow(t, env.addr)
	if _, err := c.Write(apiVersionsV0(1)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	buf := make([]byte, 32<<10)
	want := 4 + 4 + bigResponse
	for got := 0; got < want; {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := io.ReadFull(c, buf[:min(len(buf), want-got)])
		got += n
		if err != nil {
			t.Fatalf("read %d of %d bytes, then %v (kproxy: %s)", got, want, err, env.logs)
		}
		time.Sleep(10 * time.Millisecond) // a gap well under write_timeout
	}
	if took := time.Since(start); took < timeout {
		t.Logf("the response took %v, not longer than write_timeout: the test proves little here", took)
	}
	if n := testutil.ToFloat64(env.m.WriteStalls.WithLabelValues("client")); n != 0 {
		t.Fatalf("write stall closes = %v, want 0", n)
	}
	// The connection is still good.
	c.Write(apiVersionsV0(2))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := readFrame(c)
	if err != nil || corrOf(f) != 2 {
		t.Fatalf("second response: %v", err)
	}
}

// A client that stops reading is closed after write_timeout without
// progress, blamed on it, and its undelivered response is not counted.
func TestWriteTimeoutClosesAStalledReader(t *testing.T) {
	env := startBigUpstream(t, 300*time.Millisecond)
	c := dialSmallWindow(t, env.addr)
	if _, err := c.Write(apiVersionsV0(1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the pair opened", func() bool { return testutil.ToFloat64(env.m.Accepted) == 1 })
	waitFor(t, 10*time.Second, "the pair closed", func() bool { return testutil.ToFloat64(env.m.Open) == 0 })
	// The gauge drops before the closing line is logged and the cause
	// counted, both on the closing goroutine.
	waitFor(t, 10*time.Second, "the close counted as a client write stall", func() bool {
		return testutil.ToFloat64(env.m.WriteStalls.WithLabelValues("client")) >= 1
	})
	if !env.logs.contains(`"reason":"client write stalled"`) {
		t.Fatalf("close not logged as a client write stall: %s", env.logs)
	}
	if n := testutil.ToFloat64(env.m.WriteStalls.WithLabelValues("client")); n != 1 {
		t.Fatalf("write stall closes = %v, want 1", n)
	}
	if n := testutil.ToFloat64(env.m.Relay.Responses.WithLabelValues("ApiVersions")); n != 0 {
		t.Fatalf("responses counted = %v, want 0: the response was never delivered", n)
	}
	if !env.logs.contains(`"responses":0`) {
		t.Fatalf("close line counts an undelivered response: %s", env.logs)
	}
	// What it had been sent it can still read, then the connection ends.
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Logf("after the close: %v", err)
	}
}
