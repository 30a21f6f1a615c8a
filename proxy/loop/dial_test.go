package loop

import (
	"net"
	"testing"
	"time"

	"github.com/cloudwego/netpoll"
)

// dialRetrying dials the way the proxy dials upstream (dialUpstream), since
// netpoll alone can fail a connect on a busy machine.
func dialRetrying(t *testing.T, addr string) netpoll.Connection {
	t.Helper()
	c, err := dialUpstream(addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	return c
}

// A refused dial fails, and within the dial's time: netpoll reports it as
// ErrConnClosed too, so it is tried again, but each attempt is answered at
// once.
func TestDialUpstreamRefusedFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	start := time.Now()
	if _, err = dialUpstream(addr, 5*time.Second); err == nil {
		t.Fatal("dialing a closed port succeeded")
	}
	if d := time.Since(start); d >= 5*time.Second {
		t.Fatalf("a refused dial took %v, the whole dial timeout", d)
	}
}

// Dials made just after an earlier connection was hung up on and closed
// all succeed: the case in which netpoll alone fails a fresh connect with
// "closed by peer" (the hang-up meant for the closed connection delivered
// to the operator the dial reused).
func TestDialUpstreamAfterHangUps(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	peers := make(chan net.Conn, 1)
	go func() {
		for {
			c, err := busy.Accept()
			if err != nil {
				return
			}
			peers <- c
		}
	}()
	quiet, err := net.Listen("tcp", "127.0.0.1:0") // never accepts: the backlog completes connects
	if err != nil {
		t.Fatal(err)
	}
	defer quiet.Close()
	for i := 0; i < 100; i++ {
		old := dialRetrying(t, busy.Addr().String())
		peer := <-peers
		peer.Close() // the hang-up event...
		old.Close()  // ...races this close, which frees the operator
		c := dialRetrying(t, quiet.Addr().String())
		c.Close()
	}
}
