package loop

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/cloudwego/netpoll"
)

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
	up := dialRetrying(t, ln.Addr().String())
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
