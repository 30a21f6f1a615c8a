package proxy

import (
	"context"
	"net"
	"testing"
	"time"
)

// Drain turns readiness off at once, lets the request in flight get its
// answer, then closes the connection; new clients are turned away.
func TestDrainFinishesInFlight(t *testing.T) {
	got := make(chan struct{}, 1)
	up := startFakeUpstream(t, func(c net.Conn, f []byte) {
		got <- struct{}{}
		time.Sleep(400 * time.Millisecond)
		echoResponse(c, f, []byte{0, 0})
	})
	env := startProxy(t, up.addr())
	if err := env.srv.Ready(context.Background()); err != nil {
		t.Fatalf("not ready before drain: %v", err)
	}
	c := dialRaw(t, env.addr)
	c.Write(apiVersionsV0(31))
	select { // the request is in flight once the broker has it
	case <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("the request never reached the broker")
	}
	drained := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		drained <- env.srv.Drain(ctx)
	}()
	waitFor(t, 10*time.Second, "readiness off", func() bool { return env.srv.Ready(context.Background()) != nil })
	expectReset(t, env.addr, 2*time.Second) // a late client is turned away

	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := readFrame(c)
	if err != nil || corrOf(f) != 31 {
		t.Fatalf("in-flight request lost in drain: %v", err)
	}
	expectClosed(t, c, 10*time.Second)
	select {
	case err := <-drained:
		if err != nil {
			t.Fatalf("drain: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("drain did not finish")
	}
}

// A drain that times out closes what is still in flight.
func TestDrainTimeoutClosesStragglers(t *testing.T) {
	got := make(chan struct{}, 1)
	up := startFakeUpstream(t, func(net.Conn, []byte) { got <- struct{}{} }) // never answers
	env := startProxy(t, up.addr())
	c := dialRaw(t, env.addr)
	c.Write(apiVersionsV0(1))
	select { // the request is in flight once the broker has it
	case <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("the request never reached the broker")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := env.srv.Drain(ctx); err == nil {
		t.Fatal("drain reported success with a request unanswered")
	}
	expectClosed(t, c, 10*time.Second)
	if !env.logs.contains("drain timeout") {
		t.Fatalf("no drain timeout in the log:\n%s", env.logs)
	}
}
