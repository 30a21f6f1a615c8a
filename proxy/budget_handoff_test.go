//go:build linux

package proxy

import (
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/kproxy/kproxy/proxy/core"
	"github.com/kproxy/kproxy/proxy/loop"
	"golang.org/x/sys/unix"
)

// dialTinyWindow opens a client whose receive buffer is set before it
// connects, so the window it offers kproxy stays a few KiB.
func dialTinyWindow(t *testing.T, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 2 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A batch relayed on the poller that the client's socket does not take
// whole waits in kproxy's writer for a goroutine to flush it; while the
// client does not read, it is charged to max_buffered_bytes like a batch
// flushed from the pool, so many slow readers cannot each keep one
// outside the budget until write_timeout (issue 14, item 5).
func TestBufferBudgetChargesABatchHandedOnFromThePoller(t *testing.T) {
	const response = 60 << 10 // a whole batch for the poller
	body := make([]byte, response-8)
	up := startFakeUpstream(t, func(c net.Conn, f []byte) { echoResponse(c, f, body) })
	env := startProxy(t, up.addr())
	c := dialTinyWindow(t, env.addr)
	// Warm up: netpoll's reads grow until a response arrives in one, and
	// so is relayed on the poller.
	for i := range 30 {
		if _, err := c.Write(apiVersionsV0(int32(i))); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := readFrame(c); err != nil {
			t.Fatal(err)
		}
	}
	p := onlyPair(t, env)
	// kproxy's socket to the client keeps little, so a send finds it full.
	if err := unix.SetsockoptInt(p.Client().(interface{ Fd() int }).Fd(), unix.SOL_SOCKET, unix.SO_SNDBUF, 4096); err != nil {
		t.Fatal(err)
	}
	flushing := func() bool { return p.Flushing(loop.ToClient) }
	// The client stops reading; responses go on until one waits.
	for i := int32(100); !flushing(); i++ {
		if i == 140 {
			t.Fatal("no response ever waited for the client")
		}
		if _, err := c.Write(apiVersionsV0(i)); err != nil {
			t.Fatal(err)
		}
		want := p.Conn().Sess.Stats().Responses + 1
		waitFor(t, 10*time.Second, "the response relayed", func() bool { return p.Conn().Sess.Stats().Responses == want || flushing() })
	}
	if p.Pinned(core.FromUpstream) != 0 {
		t.Logf("the waiting batch was relayed in the pool")
	} else {
		t.Logf("the waiting batch was handed on from the poller")
	}
	waitFor(t, 10*time.Second, "the waiting batch charged", func() bool {
		return env.srv.core.Budget.Used() >= loop.BudgetFloor
	})
}
